"""The TypeScript client (clients/typescript) against the live test server: its types are generated
from this server's OpenAPI document, compiled (a named method using an operation or field the API
no longer has fails here), then its tests run with node's own test runner."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx2
import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["npm", *args], cwd=PACKAGE, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"npm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node and npm are needed")
@pytest.mark.skipif(
    not (PACKAGE / "node_modules" / ".bin" / "tsc").exists(),
    reason="the client's pinned dev dependencies are not installed: `make typescript` (make test does it)",
)
def test_the_typescript_client_builds_from_the_live_schema_and_passes_its_tests(server, key, tmp_path):
    schema = tmp_path / "openapi.json"
    schema.write_bytes(httpx2.get(f"{server}/api/v1/openapi.json").raise_for_status().content)
    env = {"MEMORYHUB_OPENAPI": str(schema), "MEMORYHUB_URL": server, "MEMORYHUB_API_KEY": key}
    npm("run", "generate", env=env)
    npm("run", "build")
    tested = npm("test", env=env)
    assert "# fail 0" in tested.stdout and "# pass 10" in tested.stdout, tested.stdout

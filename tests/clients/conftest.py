"""The client against the live test server: a real HTTP server on loopback in front of the
real Postgres and Redis, one API key per project (tests/conftest.py's project fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from memoryhub_client import MemoryHub

from memories import tenancy
from memories.models import Project
from tests.support.rate_limiting_proxy import RateLimitingProxy


def key_for(project: Project) -> str:
    _, plain = tenancy.api_key_create(project=project, name="client tests")
    return plain


@pytest.fixture
def server(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def key(project: Project) -> str:
    return key_for(project)


@pytest.fixture
def hub(server: str, key: str) -> Iterator[MemoryHub]:
    with MemoryHub(base_url=server, api_key=key) as client:
        yield client


@pytest.fixture
def gateway(server: str) -> Iterator[RateLimitingProxy]:
    """A gateway in front of the server that passes one request, then answers 429 (Retry-After: 7)."""
    proxy = RateLimitingProxy(server, allow=1, retry_after=7)
    yield proxy
    proxy.close()


CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"


@dataclass
class Cli:
    """The ``memoryhub`` command run as a process, as a shell would run it, with its own home
    (config and state files) and the live server in its environment."""

    env: dict[str, str]
    home: Path

    def __call__(
        self, *args: str, stdin: str = "", cwd: Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memoryhub_client", *args]
        return subprocess.run(
            command, input=stdin, env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )

    def json(self, *args: str, stdin: str = "") -> Any:
        done = self("--json", *args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def cli(server: str, key: str, tmp_path: Path) -> Cli:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(CLIENT_SRC),
        "MEMORYHUB_URL": server,
        "MEMORYHUB_API_KEY": key,
        "MEMORYHUB_USER": "alice",
    }
    return Cli(env=env, home=tmp_path)

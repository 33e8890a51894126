"""A context hook runs in a process of its own for every prompt: it must not pay for the HTTP
client library or the whole command line (``memoryhub_client.cli.run``'s short way in)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clients.conftest import CLIENT_SRC

HEAVY = ("httpx", "httpx2", "memoryhub_client.client", "memoryhub_client.cli.app", "asyncio")
# What a context hook that got its answer over http:// does without (docs/adr/0109-hook-http-request.md).
AVOIDABLE = ("http.client", "email", "logging", "typing", "ssl", "dataclasses", "traceback")
PAYLOAD = Path(__file__).parent / "hook_payloads" / "claude_code_user_prompt_submit.json"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def imported(*args: str, tmp_path: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules the command imports, as ``-X importtime`` lists them (the hook leaves without
    the interpreter's teardown, so an ``atexit`` report would never run)."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            f"import sys; sys.argv = ['memoryhub', *{list(args)!r}]; from memoryhub_client.cli import run; run()",
        ],
        input=PAYLOAD.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PYTHONPATH": str(CLIENT_SRC),
            "HOME": str(tmp_path),
            "MEMORYHUB_URL": f"http://127.0.0.1:{closed_port()}",
            "MEMORYHUB_API_KEY": "mh_unused",
            "MEMORYHUB_USER": "alice",
            **(env or {}),
        },
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return set(lines[1:])  # after the header line


def loaded_by(*args: str, tmp_path: Path) -> list[str]:
    modules = imported(*args, tmp_path=tmp_path)
    return [m for m in HEAVY if m in modules]


def test_a_context_hook_loads_neither_the_http_client_nor_the_command_line(tmp_path):
    assert loaded_by("hook", "UserPromptSubmit", tmp_path=tmp_path) == []
    assert loaded_by("hook", "--agent", "gemini", "BeforeAgent", tmp_path=tmp_path) == []


def test_a_context_hook_whose_server_is_down_imports_nothing_it_can_do_without(tmp_path):
    modules = imported("hook", "UserPromptSubmit", tmp_path=tmp_path)
    assert "memoryhub_client.cli.hook_http" in modules
    assert [m for m in AVOIDABLE if m in modules] == []
    assert "UserPromptSubmit failed" in (tmp_path / ".local" / "state" / "memoryhub" / "hooks.log").read_text()


def test_a_capture_hook_uses_the_client():
    assert "memoryhub_client.client" in loaded_by("hook", "Stop", tmp_path=Path("/nonexistent"))


def test_an_unknown_event_is_explained_by_the_whole_command_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['memoryhub', 'hook', 'SessionEnd']; from memoryhub_client.cli import run; run()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(CLIENT_SRC), "HOME": str(tmp_path)},
    )
    assert done.returncode == 1
    assert "claude-code has no 'SessionEnd' hook" in done.stderr


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="where there is no /proc the hook counts from 0")
def test_a_hook_knows_how_long_ago_its_process_started(tmp_path):
    """Its time limit counts from there: what Python's start and imports took comes out of it."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from memoryhub_client.cli.hooks import running_for; print(running_for())"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(CLIENT_SRC), "HOME": str(tmp_path)},
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    # The kernel counts a process's start in clock ticks (1/100 s): it may read up to one early.
    assert 0 < float(done.stdout) <= elapsed + 0.011

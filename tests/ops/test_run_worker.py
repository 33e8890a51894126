"""`make run`'s Celery worker: no multi-line "superuser privileges" warning on every start when
the service runs as root, but one line that says why the worker runs as root."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from serving import run
from tests.support.celery_worker import stop, worker_env

pytestmark = pytest.mark.django_db(transaction=True)


def started_output(args: list[str], *, timeout: float = 90.0) -> str:
    """What the worker prints until it is ready (or ``timeout``), then it is stopped."""
    process = subprocess.Popen(
        args, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if " ready." in line or time.monotonic() > deadline:
                break
    finally:
        stop(process)
    return "".join(lines)


@pytest.mark.skipif(os.geteuid() != 0, reason="the warning is about running as root")
def test_as_root_the_worker_starts_without_celerys_superuser_warning():
    args = [*run._children("127.0.0.1", 0)["worker"], "--without-gossip", "--without-mingle", "--without-heartbeat"]
    output = started_output(args)
    assert " ready." in output, output
    assert "superuser privileges" not in output


def test_running_as_root_is_explained_in_one_line(capsys):
    run.explain_root(euid=0)
    printed = capsys.readouterr().err.strip()
    assert len(printed.splitlines()) == 1 and "root" in printed
    run.explain_root(euid=1000)
    assert capsys.readouterr().err == ""

"""bench_retrieve's CPU accounting reads real processes: this one, a child, a Postgres backend."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from django.db import connection

from evaluation.process_cpu import CpuWindow, _command, cpu_seconds, database_backends, descendants


def _burn(seconds: float) -> None:
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


def test_a_process_cpu_time_grows_as_it_works_and_a_finished_one_has_none():
    before = cpu_seconds(os.getpid())
    _burn(0.2)
    after = cpu_seconds(os.getpid())
    assert before is not None and after is not None and after - before >= 0.15
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_seconds(gone.pid) is None


def test_descendants_are_the_processes_this_one_started_and_theirs():
    sleep = "import time; time.sleep(30)"
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {sleep!r}]); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while len(descendants(child.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        (grandchild,) = descendants(child.pid)
        assert {child.pid, grandchild} <= set(descendants(os.getpid()))
        assert child.pid not in descendants(child.pid)
    finally:
        for pid in descendants(child.pid):
            os.kill(pid, 9)
        child.kill()
        child.wait()


def test_a_window_counts_the_web_side_and_the_backend_that_worked_in_it(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    assert backend in database_backends()
    # A pid from another host's server would name some process of this machine: only Postgres counts.
    assert _command(backend) == "postgres" and _command(os.getpid()) != "postgres"
    window = CpuWindow([os.getpid()]).start()
    _burn(0.2)
    with connection.cursor() as cursor:  # a few tenths of a second of the backend's CPU
        cursor.execute("SELECT count(*) FROM generate_series(1, 5000000)")
    spent = window.stop(requests=2)
    assert spent["web_workers"] == [spent["web"]]
    assert spent["web"] >= 0.15 * 1000 / 2  # ms a request: 0.2 s over 2 requests
    assert spent["db"] is not None and spent["db"] >= 0.1 * 1000 / 2

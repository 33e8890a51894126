"""A one-shot command (`make bench`, `drills`, `load`, `fuzz`) stops the embedded servers it
started once it has printed its answer, and exits with the command's own status."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from serving import embedded
from tests.ops.helpers import BASE_DIR, manage


def servers_running(home: Path) -> tuple[bool, bool]:
    pgdata, _ = embedded._pg_paths(home)
    _, socket, pidfile = embedded._redis_paths(home)
    return embedded._pg_running(pgdata), embedded._redis_running(pidfile, socket)


# Starts a Postgres and a Redis of its own (about 19 s on two cores): not for the quick lane.
@pytest.mark.slow
def test_a_command_told_to_stop_its_servers_leaves_none_running_and_keeps_its_status(tmp_path):
    if not (settings.EMBEDDED_POSTGRES and settings.EMBEDDED_REDIS):
        pytest.skip("the suite runs against external servers")
    try:
        done = manage("migrate", "--noinput", "-v", "0", MEMORYHUB_HOME=str(tmp_path), MEMORYHUB_STOP_SERVERS="1")
        assert done.returncode == 0, done.stderr
        assert servers_running(tmp_path) == (False, False)
        failed = manage("migrate", "no_such_app", MEMORYHUB_HOME=str(tmp_path), MEMORYHUB_STOP_SERVERS="1")
        assert failed.returncode == 1 and "No installed app with label 'no_such_app'" in failed.stderr
        assert servers_running(tmp_path) == (False, False)
    finally:  # a failed run must not leave this test's servers behind either
        embedded.stop_redis(tmp_path)
        embedded.stop_postgres(tmp_path)


@pytest.mark.parametrize("target", ["bench", "drills", "load", "fuzz"])
def test_each_one_shot_make_target_asks_its_last_command_to_stop_the_servers(target):
    plan = subprocess.run(["make", "-n", target], cwd=BASE_DIR, capture_output=True, text=True, check=True).stdout
    commands = plan.replace("\\\n", " ").splitlines()  # a command continued over lines is one
    last = [line for line in commands if "manage.py" in line or "pytest" in line][-1]
    assert "MEMORYHUB_STOP_SERVERS=1" in last, last

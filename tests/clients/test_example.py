"""clients/python/examples/agent_loop.py runs as its README says, against the live server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "agent_loop.py"


def test_the_agent_loop_example_recalls_before_answering_and_captures_after(server, key, project):
    env = {**os.environ, "MEMORYHUB_URL": server, "MEMORYHUB_API_KEY": key, "MEMORYHUB_USER": "hiker"}
    run = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    first_answer = run.stdout.split("user: And something for dinner?")[0]
    assert "allergic to peanuts" in first_answer
    assert project.capture_jobs.filter(user_id="hiker", trigger="turn").count() == 2

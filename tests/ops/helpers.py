"""Run MemoryHub's entry points as separate processes, the way an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus MemoryHub's own variables, the URLs the suite exported and what
    other tests set for themselves (the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE)."""
    dropped = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYHUB_") and key not in dropped}
    env.update(extra)
    return env


def manage(*args: str, cwd: Path = BASE_DIR, **env: str) -> subprocess.CompletedProcess[str]:
    """``python <project>/manage.py …`` from ``cwd`` with a clean environment plus ``env``."""
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

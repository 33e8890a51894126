"""A real Celery worker process against the test database and the test Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection


def database_url_for_tests() -> str:
    """A URL for the database the tests run against (``test_memoryhub``)."""
    db = connection.settings_dict
    host = quote(db["HOST"], safe="") if db["HOST"].startswith("/") else db["HOST"]
    auth = quote(db["USER"]) + (":" + quote(db["PASSWORD"]) if db.get("PASSWORD") else "")
    return f"postgresql://{auth}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


def worker_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_for_tests(),
        REDIS_URL=settings.REDIS_URL,
        MEMORYHUB_EMBEDDER=settings.MEMORYHUB_EMBEDDER,
        MEMORYHUB_LLM_BASE_URL=settings.MEMORYHUB_LLM_BASE_URL,
        OPENAI_API_KEY=settings.OPENAI_API_KEY,
        MEMORYHUB_EMBEDDING_MODEL=settings.MEMORYHUB_EMBEDDING_MODEL,
    )
    env.update(extra)
    return env


def start_worker(**extra_env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "memoryhub",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        env=worker_env(**extra_env),
    )


@contextmanager
def celery_worker(**extra_env: str) -> Iterator[subprocess.Popen[bytes]]:
    """Run a worker for the block; it is stopped (SIGTERM, then SIGKILL) afterwards."""
    process = start_worker(**extra_env)
    try:
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL when it has not ended within 20 s."""
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def wait_until(condition: Callable[[], bool], *, timeout: float = 60.0, interval: float = 0.2) -> bool:
    """Poll ``condition`` until true or ``timeout``; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def purge_queue() -> None:
    """Drop queued Celery messages left by earlier tests (the broker outlives them)."""
    from memoryhub.celery import app

    app.control.purge()

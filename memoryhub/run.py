"""``make run``: the whole service in the foreground.

Starts the embedded Postgres and Redis (unless DATABASE_URL / REDIS_URL are set),
migrates, seeds the demo on first run, then runs gunicorn (several worker
processes), a Celery worker and Celery beat as children. Ctrl-C or SIGTERM stops
every child and then the embedded servers; if any child dies, everything stops.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType


def _children(port: str) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "web": [
            python,
            "-m",
            "gunicorn",
            "memoryhub.wsgi:application",
            "--config",
            "python:memoryhub.gunicorn_conf",
            "--bind",
            f"0.0.0.0:{port}",
            "--access-logfile",
            "-",
        ],
        "worker": [python, "-m", "celery", "-A", "memoryhub", "worker", "--loglevel", "INFO", "--concurrency", "2"],
        "beat": [python, "-m", "celery", "-A", "memoryhub", "beat", "--loglevel", "INFO"],
    }


def _prepare() -> None:
    import django
    from django.core.management import call_command

    django.setup()  # settings start the embedded servers when URLs are unset
    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    call_command("seed_demo")


def _stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for process in processes.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for process in processes.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


def _port_free(port: str) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", int(port)))
        except OSError:
            return False
    return True


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    port = os.environ.get("PORT", "8000")
    # Checked before anything starts: a second `make run` must not stop the servers
    # of the first one on its way out.
    if not _port_free(port):
        print(f"Port {port} is in use (another `make run`?). Set PORT to run a second instance.", file=sys.stderr)
        return 1
    _prepare()
    processes = {name: subprocess.Popen(args) for name, args in _children(port).items()}
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(
        f"MemoryHub is up: http://127.0.0.1:{port}/  (API: /api/v1/, docs: /api/v1/docs). Ctrl-C stops it.", flush=True
    )
    exit_code = 0
    while not stopping:
        dead = [name for name, p in processes.items() if p.poll() is not None]
        if dead:
            print(f"{', '.join(dead)} exited; stopping everything.", file=sys.stderr, flush=True)
            exit_code = 1
            break
        time.sleep(0.5)
    _stop(processes)
    from memoryhub import embedded

    embedded.stop_all()
    print("MemoryHub stopped.", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

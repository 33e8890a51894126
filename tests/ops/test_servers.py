"""The database connection: URL options reach libpq; the embedded Postgres admits only its own users."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.db.utils import ConnectionHandler

from common.config import PREPARE_THRESHOLD, database_settings
from serving import embedded
from tests.support.celery_worker import database_url_for_tests


def test_database_url_options_reach_postgres(db):
    config = database_settings(database_url_for_tests() + "?options=-c%20statement_timeout%3D4321&application_name=ops")
    connections = ConnectionHandler({"default": config})
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT current_setting('statement_timeout'), current_setting('application_name')")
            assert cursor.fetchone() == ("4321ms", "ops")
    finally:
        connections.close_all()


def test_tls_options_in_the_url_are_kept_beside_the_connect_timeout():
    config = database_settings("postgresql://u:p@db.example.com:5432/mh?sslmode=verify-full&sslrootcert=/ca.pem")
    prepare = {"prepare_threshold": PREPARE_THRESHOLD}  # common.prepared's statements only
    assert config["OPTIONS"] == {"connect_timeout": 5, "sslmode": "verify-full", "sslrootcert": "/ca.pem", **prepare}
    options = database_settings("postgresql://u:p@h/mh?connect_timeout=20")["OPTIONS"]
    assert options == {"connect_timeout": 20, **prepare}


def _embedded_postgres() -> tuple[Path, Path]:
    if not settings.EMBEDDED_POSTGRES:
        pytest.skip("the suite runs against an external Postgres")
    return Path(settings.MEMORYHUB_HOME) / "pgdata", Path(settings.MEMORYHUB_HOME) / "run"


def test_embedded_postgres_authenticates_by_os_user_behind_a_closed_socket_folder(servers):
    pgdata, sockets = _embedded_postgres()
    rules = [line.split() for line in (pgdata / "pg_hba.conf").read_text().splitlines() if line[:1] not in ("#", "")]
    assert rules == [["local", "all", "all", "peer", "map=memoryhub"]]
    assert stat.S_IMODE(sockets.stat().st_mode) == 0o700


def test_another_os_user_cannot_reach_the_embedded_postgres(servers):
    pgdata, sockets = _embedded_postgres()
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    psql = [embedded._pg_bin("psql"), "-h", str(sockets), "-U", "postgres", "-d", "postgres", "-c", "SELECT 1"]
    done = subprocess.run(psql, user=65534, group=65534, extra_groups=[], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "Permission denied" in done.stderr

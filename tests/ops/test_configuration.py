"""One typed reader, validated at start; settings without side effects; safe defaults."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings

from common.config import Environment
from memoryhub.settings import env as declared
from serving import run
from tests.ops.helpers import BASE_DIR, manage

STRONG_KEY = "k3y-" + "x9Qz" * 13
PRODUCTION = {
    "MEMORYHUB_PRODUCTION": "1",
    "SECRET_KEY": STRONG_KEY,
    "ALLOWED_HOSTS": "memory.example.com",
    "DATABASE_URL": "postgresql://memoryhub:secret@db.example.com:5432/memoryhub?sslmode=verify-full",
    "REDIS_URL": "rediss://:secret@cache.example.com:6380/0",
}


def test_help_starts_no_server_and_writes_nothing(tmp_path):
    home = tmp_path / "home"
    done = manage("help", MEMORYHUB_HOME=str(home))
    assert done.returncode == 0, done.stderr
    assert "migrate" in done.stdout
    assert not home.exists()


def test_a_database_command_gets_the_embedded_servers_and_exports_their_urls(servers):
    if not (settings.EMBEDDED_POSTGRES and settings.EMBEDDED_REDIS):
        pytest.skip("the suite runs against external servers")
    code = (
        "import os; from django.db import connection; from django.core.cache import cache; "
        "connection.cursor().execute('SELECT 1'); cache.set('ops', 1); "
        "print(os.environ['DATABASE_URL']); print(os.environ['REDIS_URL'])"
    )
    done = manage("shell", "-c", code, MEMORYHUB_HOME=str(settings.MEMORYHUB_HOME))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == [settings.DATABASE_URL, settings.REDIS_URL]


def test_a_relative_home_is_relative_to_the_project_not_the_current_folder(tmp_path):
    done = manage("diffsettings", cwd=tmp_path, MEMORYHUB_HOME=".ops-relative-home")
    assert done.returncode == 0, done.stderr
    assert f"MEMORYHUB_HOME = PosixPath('{BASE_DIR / '.ops-relative-home'}')" in done.stdout
    assert not (tmp_path / ".ops-relative-home").exists()


def test_a_misspelt_variable_stops_start_with_an_error_naming_it(tmp_path):
    done = manage("help", MEMORYHUB_HOME=str(tmp_path), MEMORYHUB_MAX_BULKK="5", MEMORYHUB_LOCAL_LLM="1")
    assert done.returncode == 2
    assert "MEMORYHUB_MAX_BULKK is set but is not a MemoryHub variable" in done.stderr
    assert "(did you mean MEMORYHUB_MAX_BULK?)" in done.stderr
    assert "MEMORYHUB_LOCAL_LLM" not in done.stderr  # reserved for work in progress


def test_every_bad_value_is_named_in_one_error():
    env = Environment(
        {"MEMORYHUB_HYDE_N": "three", "MEMORYHUB_JUDGE": "maybe", "MEMORYHUB_EMBEDDER": "remote"}, base_dir=BASE_DIR
    )
    assert env.integer("MEMORYHUB_HYDE_N", 3, "n", minimum=1) == 3
    assert env.switch("MEMORYHUB_JUDGE", False, "judge") is False
    assert env.choice("MEMORYHUB_EMBEDDER", "local", ("local", "openai"), "embedder") == "local"
    with pytest.raises(Exception, match="MemoryHub configuration") as raised:
        env.check()
    message = str(raised.value)
    assert "MEMORYHUB_HYDE_N='three': not a whole number" in message
    assert "MEMORYHUB_JUDGE='maybe': not a switch" in message
    assert "MEMORYHUB_EMBEDDER='remote': must be one of local, openai" in message


def test_every_variable_is_in_the_configuration_table():
    section = (BASE_DIR / "docs" / "configuration.md").read_text().split("## Variables", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([A-Z_]+)`", section, flags=re.MULTILINE))
    assert set(declared.variables) - rows == set()
    assert rows - set(declared.variables) == set()


def test_every_setting_the_code_reads_is_declared():
    pattern = re.compile(r"""(?:settings\.|getattr\(settings,\s*"|setting\(")(MEMORYHUB_[A-Z0-9_]+)""")
    read = {
        name
        for folder in ("memoryhub", "memories", "retrieval", "capture", "consolidation")
        for path in (BASE_DIR / folder).rglob("*.py")
        for name in pattern.findall(path.read_text())
    }
    assert read - set(declared.variables) == set()


def test_development_defaults_are_loopback_and_a_kept_random_key(servers):  # starting them keeps the key
    assert "*" not in settings.ALLOWED_HOSTS
    assert settings.SECRET_KEY not in ("", "insecure-dev-key")
    if not os.environ.get("SECRET_KEY"):  # the suite's own key, kept for every process of the home
        assert (Path(settings.MEMORYHUB_HOME) / "secret-key").read_text().strip() == settings.SECRET_KEY
    assert f"127.0.0.1:{settings.PORT}" in run._children(settings.MEMORYHUB_BIND, settings.PORT)["web"]


def test_production_with_its_settings_passes_djangos_deployment_checks(tmp_path):
    done = manage("check", "--deploy", MEMORYHUB_HOME=str(tmp_path), **PRODUCTION)
    assert done.returncode == 0, done.stderr
    # HSTS for subdomains and the preload list (W005, W021) are the operator's call, not ours.
    assert set(re.findall(r"security\.W\d+", done.stderr)) <= {"security.W005", "security.W021"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"SECRET_KEY": ""}, "SECRET_KEY: production needs a random key"),
        ({"SECRET_KEY": "short"}, "SECRET_KEY: production needs a random key"),
        ({"ALLOWED_HOSTS": "*"}, "ALLOWED_HOSTS: production needs the host names"),
        ({"DATABASE_URL": ""}, "DATABASE_URL and REDIS_URL: production runs against external servers"),
        ({"MEMORYHUB_HSTS_SECONDS": "0"}, "MEMORYHUB_HSTS_SECONDS: production sends HSTS"),
        ({"MEMORYHUB_DEBUG": "1"}, "MEMORYHUB_DEBUG: must be off in production"),
    ],
)
def test_production_refuses_to_start_without_its_secure_settings(tmp_path, change, named):
    done = manage("check", MEMORYHUB_HOME=str(tmp_path), **{**PRODUCTION, **change})
    assert done.returncode == 2
    assert named in done.stderr

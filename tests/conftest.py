"""Shared fixtures: a team, a project with an API key, and two users (one to attack the other).

Tests run against the real embedded Postgres (pgvector) and Redis under
``$MEMORYHUB_HOME`` (``make test`` points it at ``.memoryhub/test``), or the servers
named by ``DATABASE_URL`` / ``REDIS_URL``. The servers start once, when the first test that
needs them runs (settings only name them), and their URLs are exported to the processes tests
start. A test needs them when it asks for the database (``db``, ``transactional_db``, the
``django_db`` mark, ``live_server``, or a fixture that does) or for ``redis``; every other test
runs without them, and ``pytest --without-servers`` (``make test-fast``) runs only those
(docs/adr/0091-fast-test-lane.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from redis import Redis

from memories import tenancy
from memories.models import Project

pytest_plugins = ["tests.support.openai_fixtures"]


# Asking for any of these (directly or through another fixture) means the test needs the servers.
SERVER_FIXTURES = frozenset(
    {
        "servers",
        "redis",
        "django_db_setup",
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
    }
)
SERVERS_STARTED = pytest.StashKey[bool]()


def needs_servers(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(fixtures & SERVER_FIXTURES) or item.get_closest_marker("django_db") is not None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--without-servers",
        action="store_true",
        help="run only the tests that need neither Postgres nor Redis (make test-fast); the others are deselected",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Deselected, not skipped: pytest reports how many were left out, and a plain run (make test)
    # has nothing left out.
    if not config.getoption("without_servers"):
        return
    kept = [item for item in items if not needs_servers(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if needs_servers(item)])
        items[:] = kept


# The folders the embedded servers create in the home folder when they first start.
SERVER_FOLDERS = ("pgdata", "redis")
FOLDERS_BEFORE = pytest.StashKey[set[str]]()


def _server_folders() -> set[str]:
    from django.conf import settings

    return {name for name in SERVER_FOLDERS if (settings.MEMORYHUB_HOME / name).exists()}


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FOLDERS_BEFORE] = _server_folders()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from django.conf import settings

    from serving import embedded

    # A process started by a server-free test (gunicorn, manage.py) starts the servers itself: that
    # test needs them and must say so, or the fast lane would slowly and silently run them.
    if session.config.getoption("without_servers") and _server_folders() - session.config.stash[FOLDERS_BEFORE]:
        embedded.stop_servers()
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nA test started the embedded servers under {settings.MEMORYHUB_HOME} without asking for them")
    # `make test` leaves no daemons behind; a plain pytest run keeps them for the next run.
    elif settings.MEMORYHUB_STOP_SERVERS and session.config.stash.get(SERVERS_STARTED, False):
        embedded.stop_started_servers()


@pytest.fixture(scope="session")
def servers(pytestconfig: pytest.Config) -> None:
    """The embedded Postgres and Redis (those that DATABASE_URL / REDIS_URL do not replace), started
    by the first test that needs them and exported to the processes tests start."""
    if pytestconfig.getoption("without_servers"):
        pytest.fail("a test that needs the servers ran with --without-servers")
    from serving import embedded

    embedded.start_servers()
    pytestconfig.stash[SERVERS_STARTED] = True


@pytest.fixture(scope="session")
def django_db_setup(servers: None, django_db_setup: None) -> None:
    """pytest-django's test database, on servers started first (``servers`` comes first on purpose)."""


@pytest.fixture
def redis(servers: None) -> Redis:
    """The tests' own Redis, emptied for this test (cache, queues, rate limits)."""
    from common.redis import redis_client

    client = redis_client()
    client.flushdb()
    return client


@pytest.fixture(autouse=True)
def clean_redis(request: pytest.FixtureRequest) -> None:
    """Each test that uses the servers starts with an empty Redis: the servers are the tests' own."""
    if needs_servers(request.node):
        request.getfixturevalue("redis")


@pytest.fixture(autouse=True)
def finish_vector_reads() -> Iterator[None]:
    """Whole reads of a user's vectors (``retrieval.vectors.resident_vectors``'s loader thread, which a search
    outside a transaction starts) end within their test: one still reading when a transactional
    test's tables are truncated deadlocked with the truncation."""
    yield
    from retrieval.vectors import resident_vectors

    resident_vectors.process_loader().wait()


@dataclass
class ApiClient:
    """The Django test client with a Bearer key, speaking JSON."""

    client: Client
    key: str
    project: Project

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(f"/api/v1{path}", params, headers=self._headers())

    def delete(self, path: str, **params: Any) -> Any:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return self.client.delete(f"/api/v1{path}?{query}", headers=self._headers())

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(f"/api/v1{path}", body, content_type="application/json", headers=self._headers())

    def patch(self, path: str, body: Any) -> Any:
        return self.client.patch(f"/api/v1{path}", body, content_type="application/json", headers=self._headers())

    def put(self, path: str, body: Any) -> Any:
        return self.client.put(f"/api/v1{path}", body, content_type="application/json", headers=self._headers())


@pytest.fixture
def project(db: None) -> Project:
    return tenancy.project_get_or_create(slug="acme-agent", team_slug="acme")


@pytest.fixture
def other_project(db: None) -> Project:
    return tenancy.project_get_or_create(slug="rival-agent", team_slug="rival")


@pytest.fixture
def api(project: Project) -> ApiClient:
    _, plain = tenancy.api_key_create(project=project, name="tests")
    return ApiClient(client=Client(), key=plain, project=project)


@pytest.fixture
def other_api(other_project: Project) -> ApiClient:
    _, plain = tenancy.api_key_create(project=other_project, name="tests")
    return ApiClient(client=Client(), key=plain, project=other_project)


@pytest.fixture
def alice() -> str:
    return "alice"


@pytest.fixture
def mallory() -> str:
    """The second user of the same project, who tries to reach alice's memories."""
    return "mallory"


@pytest.fixture
def make_memory(api: ApiClient) -> Iterator[Any]:
    def make(user_id: str = "alice", content: str = "Alice prefers tabs over spaces.", **fields: Any) -> dict[str, Any]:
        response = api.post("/memories", {"user_id": user_id, "content": content, **fields})
        assert response.status_code == 201, response.content
        return dict(response.json())

    yield make

"""Shared fixtures: a team, a project with an API key, and two users (one to attack the other).

Tests run against the real embedded Postgres (pgvector) and Redis under
``$MEMORYHUB_HOME`` (``make test`` points it at ``.memoryhub/test``), or the servers
named by ``DATABASE_URL`` / ``REDIS_URL``. The suite starts the embedded servers once, at
configure time (settings only name them), and exports their URLs to the processes tests start.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from memories import services
from memories.models import Project

pytest_plugins = ["tests.support.openai_fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    from memoryhub import embedded

    embedded.start_servers()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # `make test` leaves no daemons behind; a plain pytest run keeps them for the next run.
    from django.conf import settings

    if settings.MEMORYHUB_STOP_SERVERS:
        from memoryhub import embedded

        embedded.stop_started_servers()


@pytest.fixture(autouse=True)
def clean_redis() -> None:
    """Each test starts with an empty Redis (cache, queues, rate limits): the servers are the tests' own."""
    from memoryhub.redis import redis_client

    redis_client().flushdb()


@pytest.fixture(autouse=True)
def drain_deferred_writes() -> Iterator[None]:
    """Deferred writes (the retrieval log) land within their test, and leave no connection open."""
    yield
    from memoryhub import deferred

    assert deferred.flush(30, close=True), "deferred writes still running 30 s after the test"


@pytest.fixture(autouse=True)
def finish_vector_reads() -> Iterator[None]:
    """Whole reads of a user's vectors (``retrieval.resident_vectors``'s loader thread, which a search
    outside a transaction starts) end within their test: one still reading when a transactional
    test's tables are truncated deadlocked with the truncation."""
    yield
    from retrieval import resident_vectors

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
    return services.project_get_or_create(slug="acme-agent", team_slug="acme")


@pytest.fixture
def other_project(db: None) -> Project:
    return services.project_get_or_create(slug="rival-agent", team_slug="rival")


@pytest.fixture
def api(project: Project) -> ApiClient:
    _, plain = services.api_key_create(project=project, name="tests")
    return ApiClient(client=Client(), key=plain, project=project)


@pytest.fixture
def other_api(other_project: Project) -> ApiClient:
    _, plain = services.api_key_create(project=other_project, name="tests")
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

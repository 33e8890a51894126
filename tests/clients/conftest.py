"""The client against the live test server: a real HTTP server on loopback in front of the
real Postgres and Redis, one API key per project (tests/conftest.py's project fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memoryhub_client import MemoryHub

from memories import services
from memories.models import Project
from tests.support.rate_limiting_proxy import RateLimitingProxy


def key_for(project: Project) -> str:
    _, plain = services.api_key_create(project=project, name="client tests")
    return plain


@pytest.fixture
def server(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def key(project: Project) -> str:
    return key_for(project)


@pytest.fixture
def hub(server: str, key: str) -> Iterator[MemoryHub]:
    with MemoryHub(base_url=server, api_key=key) as client:
        yield client


@pytest.fixture
def gateway(server: str) -> Iterator[RateLimitingProxy]:
    """A gateway in front of the server that passes one request, then answers 429 (Retry-After: 7)."""
    proxy = RateLimitingProxy(server, allow=1, retry_after=7)
    yield proxy
    proxy.close()

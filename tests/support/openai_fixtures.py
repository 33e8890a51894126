"""Pytest fixtures for the loopback OpenAI-compatible server (import them from a conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI for one test, stopped afterwards."""
    with FakeOpenAI() as server:
        yield server

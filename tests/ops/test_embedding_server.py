"""OpenAI-compatible embeddings may come from their own server (and key), by default the chat one's."""

from __future__ import annotations

import pytest

from retrieval.embedding import embedders
from tests.support.openai_server import FakeOpenAI


@pytest.fixture
def openai_embeddings(settings, fake_openai):
    settings.MEMORYHUB_EMBEDDER, settings.MEMORYHUB_EMBEDDING_MODEL = "openai", "fake-embed"
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "chat-key"
    embedders.reset_embedder_cache()
    yield settings
    embedders.reset_embedder_cache()


def test_embeddings_use_their_own_server_and_key_when_named(openai_embeddings, fake_openai):
    with FakeOpenAI(api_key="embeddings-key") as embeddings_server:
        openai_embeddings.MEMORYHUB_EMBEDDING_BASE_URL = embeddings_server.base_url
        openai_embeddings.MEMORYHUB_EMBEDDING_API_KEY = "embeddings-key"
        vectors = embedders.get_embedder().embed(["Alice prefers tea."])
        assert vectors.shape == (1, 64)
        assert embeddings_server.count("/embeddings") == 1
    assert fake_openai.count("/embeddings") == 0


def test_embeddings_use_the_chat_server_by_default(openai_embeddings, fake_openai):
    embedders.get_embedder().embed(["Alice prefers tea."])
    assert fake_openai.count("/embeddings") == 1

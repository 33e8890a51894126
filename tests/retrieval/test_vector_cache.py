"""The vector cache keeps each route of a model apart: a float32 vector is never served for int8."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from common.redis import redis_client
from retrieval.embedding.local_embedder import INT8_ROUTE, LOCAL_MODEL_NAME, RETIRED_INT8_ROUTES, LocalEmbedder
from retrieval.embedding.vector_cache import cache_key, cache_names, embed_texts, forget_cached, project_cache_name

# The cache is in Redis.
pytestmark = pytest.mark.usefixtures("redis")


def test_each_route_of_the_local_model_caches_its_own_vectors() -> None:
    text = f"Each route keeps its own vector ({uuid.uuid4().hex})."
    float32, int8 = LocalEmbedder(int8=False), LocalEmbedder()

    first = embed_texts([text], embedder=float32)
    second = embed_texts([text], embedder=int8)

    np.testing.assert_array_equal(second, int8.embed([text]))  # not the float32 vector cached first
    assert not np.array_equal(first, second)
    keys = [cache_key(name, text) for name in cache_names(LOCAL_MODEL_NAME)]
    assert keys[:2] == [cache_key(LOCAL_MODEL_NAME, text), cache_key(LOCAL_MODEL_NAME + INT8_ROUTE, text)]
    assert redis_client().exists(*keys) == 2  # the retired routes' names are erased, never written
    np.testing.assert_array_equal(embed_texts([text], embedder=int8), second)  # now from the cache
    redis_client().delete(*keys)


def test_a_vector_cached_by_a_retired_route_is_never_served() -> None:
    text = f"Cached by the route before ({uuid.uuid4().hex})."
    retired = cache_key(LOCAL_MODEL_NAME + RETIRED_INT8_ROUTES[0], text)
    redis_client().set(retired, np.ones(384, dtype=np.float32).tobytes())
    int8 = LocalEmbedder()
    np.testing.assert_array_equal(embed_texts([text], embedder=int8), int8.embed([text]))
    assert retired in {cache_key(name, text) for name in cache_names(LOCAL_MODEL_NAME)}  # erasure drops it
    redis_client().delete(*(cache_key(name, text) for name in cache_names(LOCAL_MODEL_NAME)))


def test_forgetting_a_projects_query_vectors_keeps_every_other_cached_vector() -> None:
    text = f"Asked in two projects ({uuid.uuid4().hex})."
    names = [project_cache_name(LOCAL_MODEL_NAME, 7), project_cache_name(LOCAL_MODEL_NAME, 70), LOCAL_MODEL_NAME]
    keys = [cache_key(name, text) for name in names]
    for key in keys:
        redis_client().set(key, b"\0" * 16)

    assert forget_cached(project_cache_name("*", 7)) >= 1

    assert [bool(redis_client().exists(key)) for key in keys] == [False, True, True]
    redis_client().delete(*keys)


def test_the_redis_client_reads_replies_with_hiredis() -> None:
    """hiredis is a dependency for speed alone (common/redis.py): redis-py falls back to its Python
    parser without a word when the package is missing."""
    pool = redis_client().connection_pool
    connection = pool.get_connection()
    try:
        assert type(connection._parser).__name__ == "_HiredisParser"
    finally:
        pool.release(connection)

"""``embed_texts``: the embedder behind a Redis cache keyed by (model, text hash).

A text is embedded once per model; a cache outage only costs speed. Which embedder to use is the
caller's choice (``retrieval.embedding.embedders``); storing memory vectors is ``retrieval.vectors.memory_vectors``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import redis

from common.redis import redis_client
from retrieval.embedding.local_embedder import INT8_ROUTE, RETIRED_INT8_ROUTES
from retrieval.embedding.protocol import Embedder, Vectors

log = logging.getLogger(__name__)

CACHE_TTL_SECONDS = 7 * 24 * 3600


KEY_PREFIX = "memoryhub:emb:"


def cache_key(model: str, text: str) -> str:
    return f"{KEY_PREFIX}{model}:{hashlib.sha256(text.encode()).hexdigest()}"


def cache_name(embedder: Embedder) -> str:
    """The name an embedder's vectors are cached under: its model's, with the route when the model
    has more than one (``LocalEmbedder.cache_name``), so a float32 vector is not served for int8."""
    return str(getattr(embedder, "cache_name", embedder.name))


def project_cache_name(name: str, project_id: int) -> str:
    """The name a project's query vectors are cached under (``retrieval.queries.ProjectCache``)."""
    return f"{name}@project:{project_id}"


def forget_cached(name: str = "*") -> int:
    """Drop the cached vectors of every cache name matching ``name`` (a Redis glob): the benches'
    way to have each text embedded afresh. How many were dropped."""
    client = redis_client()
    dropped = 0
    for key in client.scan_iter(f"{KEY_PREFIX}{name}:*", count=1000):
        dropped += int(client.delete(key))
    return dropped


def cache_names(model: str) -> tuple[str, ...]:
    """Every name ``model``'s vectors may be cached under, one per route, retired routes too
    (erasure drops them all)."""
    return (model, f"{model}{INT8_ROUTE}", *(f"{model}{route}" for route in RETIRED_INT8_ROUTES))


def embed_texts(
    texts: Sequence[str],
    *,
    embedder: Embedder,
    looked_up: Sequence[bytes | None] = (),
) -> Vectors:
    """Embed ``texts`` with a Redis cache by (model, text hash): a text is embedded once.

    ``looked_up``: what
    the caller already read from the cache for the first texts (by ``cache_key``; None: not
    cached), so that only the others are asked for. Raises EmbedderError when the embedder fails; a
    cache outage only costs speed.
    """
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    keys = [cache_key(cache_name(embedder), text) for text in texts]
    cached: list[Any] = list(looked_up[: len(texts)])
    if len(cached) < len(texts):
        try:
            cached += redis_client().mget(keys[len(cached) :])
        except redis.RedisError:
            cached += [None] * (len(texts) - len(cached))
    missing = [i for i, raw in enumerate(cached) if raw is None]
    fresh = embedder.embed([texts[i] for i in missing]) if missing else None
    dimension = fresh.shape[1] if fresh is not None else len(cached[0]) // 4
    result = np.empty((len(texts), dimension), dtype=np.float32)
    for i, raw in enumerate(cached):
        if raw is not None:
            result[i] = np.frombuffer(raw, dtype=np.float32)
    if fresh is not None:
        result[missing] = fresh
        _cache_store([keys[i] for i in missing], fresh)
    return result


def _cache_store(keys: list[str], vectors: Vectors) -> None:
    try:
        pipe = redis_client().pipeline(transaction=False)
        for key, vector in zip(keys, vectors, strict=True):
            pipe.set(key, vector.astype(np.float32).tobytes(), ex=CACHE_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError:
        log.warning("embedding cache unavailable; continuing without it")

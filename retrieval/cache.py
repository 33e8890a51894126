"""Per-turn answer cache and the soft per-user rate limit, both in Redis.

Redis trouble never fails a retrieval: the cache then misses and the limit allows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from common.redis import redis_client

log = logging.getLogger(__name__)

TURN_TTL_SECONDS = 15 * 60
RATE_WINDOW_SECONDS = 60


def turn_key(project_id: int, user_id: str, turn_id: str) -> str:
    digest = hashlib.sha256(f"{project_id}\0{user_id}\0{turn_id}".encode()).hexdigest()
    return f"memoryhub:turn:{digest}"


def put(key: str, body: dict[str, Any]) -> None:
    try:
        redis_client().set(key, json.dumps(body, default=str), ex=TURN_TTL_SECONDS)
    except redis.RedisError:
        log.warning("turn cache unavailable")


def rate_key(project_id: int, user_id: str) -> str:
    digest = hashlib.sha256(f"{project_id}\0{user_id}".encode()).hexdigest()[:32]
    return f"memoryhub:rate:{digest}"


@dataclass(frozen=True)
class Opening:
    """What Redis holds for a retrieve before it searches (``open_turn``)."""

    # The turn's cached answer (None: none, or the turn has no id).
    entry: dict[str, Any] | None
    # 0 when the retrieve is within the user's limit (or was answered from the cache: not counted),
    # else the seconds until the user's window closes.
    wait: int
    # The cached vectors of the texts asked for, raw (None: not cached, or not asked because the
    # turn was cached).
    vectors: list[bytes | None]


def open_turn(
    *, turn_key: str | None, project_id: int, user_id: str, limit: int, vector_keys: Sequence[str]
) -> Opening:
    """The turn's cached answer (``turn_key``) and the cached vectors of ``vector_keys``, in one
    round trip; then, when the turn is not cached, the rate limit counted (``limit`` retrievals a
    minute for the user, 0: none) in a second: a cached turn is not counted. Redis trouble answers
    as a miss that is allowed, with no vector cached."""
    uncached: list[bytes | None] = [None] * len(vector_keys)
    try:
        client = redis_client()
        reads = client.pipeline(transaction=False)
        if turn_key:
            reads.get(turn_key)
        if vector_keys:
            reads.mget(vector_keys)
        replies = reads.execute()
        entry = replies.pop(0) if turn_key else None
        if entry is not None:
            return Opening(entry=json.loads(entry), wait=0, vectors=uncached)
        vectors = list(replies[0]) if vector_keys else []
        wait = _counted(client, rate_key(project_id, user_id), limit) if limit > 0 else 0
    except redis.RedisError:
        log.warning("turn cache and rate limit unavailable")
        return Opening(entry=None, wait=0, vectors=uncached)
    return Opening(entry=None, wait=wait, vectors=vectors)


def _counted(client: redis.Redis, key: str, limit: int) -> int:
    """Count one retrieve in the user's window, which its first call opens; 0 within ``limit``, else
    the seconds until the window closes."""
    pipe = client.pipeline(transaction=False)
    pipe.set(key, 0, ex=RATE_WINDOW_SECONDS, nx=True)
    pipe.incr(key)
    pipe.ttl(key)
    _, count, ttl = pipe.execute()
    return 0 if int(count) <= limit else max(1, int(ttl) if int(ttl) > 0 else RATE_WINDOW_SECONDS)

"""Session state in Redis: the last N messages of each conversation, for 24 hours.

Postgres holds every message; Redis holds a short, expiring copy of each conversation's
tail so an agent can read its recent context without touching the database. The copy is
best-effort: a Redis failure never fails a write, and a list Redis has lost (expiry,
restart, eviction) is rebuilt from Postgres by the reader.

Appends use ``RPUSHX``, which only appends to a list that exists: appending to a lost list
would leave a tail of one message that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

import redis
from django.conf import settings

from common.redis import redis_client

log = logging.getLogger(__name__)


def session_key(conversation_id: Any) -> str:
    return f"memoryhub:session:{conversation_id}"


def _limits() -> tuple[int, int]:
    return int(settings.MEMORYHUB_SESSION_MESSAGES), int(settings.MEMORYHUB_SESSION_TTL_SECONDS)


def session_append(*, conversation_id: Any, messages: Sequence[dict[str, Any]]) -> None:
    """Append messages to the conversation's cached tail, if the tail is cached."""
    if not messages:
        return
    size, ttl = _limits()
    key = session_key(conversation_id)
    try:
        pipe = redis_client().pipeline(transaction=True)
        pipe.rpushx(key, *[json.dumps(m) for m in messages])
        pipe.ltrim(key, -size, -1)
        pipe.expire(key, ttl)
        pipe.execute()
    except redis.RedisError:
        log.warning("session state unavailable; conversation %s will be rebuilt from Postgres", conversation_id)
        _forget(key)


def session_store(*, conversation_id: Any, messages: Sequence[dict[str, Any]]) -> None:
    """Replace the cached tail with ``messages`` (the newest N, oldest first)."""
    size, ttl = _limits()
    key = session_key(conversation_id)
    try:
        pipe = redis_client().pipeline(transaction=True)
        pipe.delete(key)
        if messages:
            pipe.rpush(key, *[json.dumps(m) for m in messages[-size:]])
            pipe.expire(key, ttl)
        pipe.execute()
    except redis.RedisError:
        log.warning("session state unavailable; not caching conversation %s", conversation_id)


def session_recent(*, conversation_id: Any, limit: int) -> list[dict[str, Any]] | None:
    """The newest ``limit`` cached messages, oldest first; ``None`` when not cached or Redis is down."""
    try:
        raw = redis_client().lrange(session_key(conversation_id), -limit, -1)
    except redis.RedisError:
        return None
    if not raw:
        return None
    messages = [json.loads(item) for item in raw]
    # Two requests may commit in one order and append in the other: seq is the truth.
    unique = {m["seq"]: m for m in messages}
    return [unique[seq] for seq in sorted(unique)][-limit:]


def _forget(key: str) -> None:
    # If Redis is down the list cannot be read either; it expires or is rebuilt later.
    with contextlib.suppress(redis.RedisError):
        redis_client().delete(key)

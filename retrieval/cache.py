"""Per-turn answer cache and the soft per-user rate limit, both in Redis.

Redis trouble never fails a retrieval: the cache then misses and the limit allows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import redis

from memoryhub.redis import redis_client

log = logging.getLogger(__name__)

TURN_TTL_SECONDS = 15 * 60
RATE_WINDOW_SECONDS = 60


def turn_key(project_id: int, user_id: str, turn_id: str) -> str:
    digest = hashlib.sha256(f"{project_id}\0{user_id}\0{turn_id}".encode()).hexdigest()
    return f"memoryhub:turn:{digest}"


def get(key: str) -> dict[str, Any] | None:
    """The cached answer for a turn, or None."""
    try:
        raw = redis_client().get(key)
    except redis.RedisError:
        return None
    return json.loads(raw) if raw else None


def put(key: str, body: dict[str, Any]) -> None:
    try:
        redis_client().set(key, json.dumps(body, default=str), ex=TURN_TTL_SECONDS)
    except redis.RedisError:
        log.warning("turn cache unavailable")


def wait_seconds(project_id: int, user_id: str, *, limit: int) -> int:
    """Count one retrieval for the user in this minute: 0 when allowed, else the seconds until
    the user's window closes (0 = no limit; Redis trouble allows)."""
    if limit <= 0:
        return 0
    digest = hashlib.sha256(f"{project_id}\0{user_id}".encode()).hexdigest()[:32]
    key = f"memoryhub:rate:{digest}"
    try:
        # A window opens with the user's first call and lasts a minute (no boundary
        # where a burst straddling two clock minutes gets twice the limit).
        count = int(redis_client().incr(key))
        if count == 1:
            redis_client().expire(key, RATE_WINDOW_SECONDS)
        if count <= limit:
            return 0
        ttl = int(redis_client().ttl(key))
    except redis.RedisError:
        return 0
    return max(1, ttl if ttl > 0 else RATE_WINDOW_SECONDS)

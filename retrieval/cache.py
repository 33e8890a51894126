"""Per-turn answer cache and the soft per-user rate limit, both in Redis.

Redis trouble never fails a retrieval: the cache then misses and the limit allows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

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


# GET the turn's answer; when there is none, count the retrieve in the user's window (INCR; the
# first of a window sets its expiry; its TTL when over the limit) and MGET the cached vectors.
# KEYS: the turn's key and the rate key ('' for none), then the vectors' keys. ARGV: the window's
# seconds and the limit. A script, so that a cached answer is not counted, as when each was its own
# call, in one round trip instead of three (docs/adr/0041-one-redis-round-trip.md).
_OPEN_TURN = """
local entry = false
if KEYS[1] ~= '' then entry = redis.call('GET', KEYS[1]) end
if entry then return {entry} end
local count, ttl = 0, -1
if KEYS[2] ~= '' then
    count = redis.call('INCR', KEYS[2])
    if count == 1 then redis.call('EXPIRE', KEYS[2], ARGV[1]) end
    if count > tonumber(ARGV[2]) then ttl = redis.call('TTL', KEYS[2]) end
end
local vectors = {}
if #KEYS > 2 then vectors = redis.call('MGET', unpack(KEYS, 3)) end
return {false, count, ttl, vectors}
"""
_open_turn_script: Script | None = None
# Clients whose server refused the script: they get the calls one by one from then on (always
# right, one round trip a call), not a refused script first on every retrieve.
_refuse_scripts: weakref.WeakSet[redis.Redis] = weakref.WeakSet()


def open_turn(
    *, turn_key: str | None, project_id: int, user_id: str, limit: int, vector_keys: Sequence[str]
) -> Opening:
    """In one round trip: the turn's cached answer (``turn_key``), else the rate limit counted
    (``limit`` retrievals a minute for the user, 0: none) and the cached vectors of ``vector_keys``.
    Redis trouble answers as a miss that is allowed, with no vector cached."""
    global _open_turn_script
    keys = [turn_key or "", rate_key(project_id, user_id) if limit > 0 else "", *vector_keys]
    try:
        client = redis_client()
        if _open_turn_script is None:
            _open_turn_script = client.register_script(_OPEN_TURN)
        if client in _refuse_scripts:
            reply = _open_by_calls(client, keys, limit)
        else:
            try:
                # EVALSHA; the first call on a server that does not know the script yet loads it.
                reply = _open_turn_script(keys=keys, args=[RATE_WINDOW_SECONDS, limit], client=client)
            except redis.ResponseError:
                # A server that runs no scripts (a user without @scripting, a service that forbids
                # them): the same calls one by one, so that the limit still holds.
                _refuse_scripts.add(client)
                reply = _open_by_calls(client, keys, limit)
    except redis.RedisError:
        log.warning("turn cache and rate limit unavailable")
        return Opening(entry=None, wait=0, vectors=[None] * len(vector_keys))
    if reply[0] is not None:
        return Opening(entry=json.loads(reply[0]), wait=0, vectors=[None] * len(vector_keys))
    _, count, ttl, vectors = reply
    wait = 0 if limit <= 0 or int(count) <= limit else max(1, int(ttl) if int(ttl) > 0 else RATE_WINDOW_SECONDS)
    return Opening(entry=None, wait=wait, vectors=list(vectors))


def _open_by_calls(client: redis.Redis, keys: list[str], limit: int) -> list[Any]:
    """``_OPEN_TURN`` as separate calls (its reply's shape)."""
    turn, rate, vector_keys = keys[0], keys[1], keys[2:]
    if turn and (entry := client.get(turn)) is not None:
        return [entry]
    count, ttl = 0, -1
    if rate:
        count = int(client.incr(rate))
        if count == 1:
            client.expire(rate, RATE_WINDOW_SECONDS)
        if count > limit:
            ttl = int(client.ttl(rate))
    return [None, count, ttl, client.mget(vector_keys) if vector_keys else []]

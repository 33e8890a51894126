"""The one Redis client of a process: caches, rate limits, the conversation tail, progress.

Celery talks to the same server through its own connections (``CELERY_BROKER_URL``). Short
timeouts: every caller treats Redis as optional and degrades (named) when it is down.

redis-py reads the replies with hiredis (a C parser, a dependency for that alone): a retrieve's
few Redis calls cost ~20-60 us of the web worker's CPU less each than with redis-py's Python parser
(docs/adr/0041-one-redis-round-trip.md).
"""

from __future__ import annotations

import redis
from django.conf import settings

_client: redis.Redis | None = None


def redis_client() -> redis.Redis:
    """The process's Redis client, connected lazily to ``settings.REDIS_URL``."""
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client

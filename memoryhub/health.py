"""Dependency checks behind GET /api/v1/health and the UI's status line."""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from ninja import Schema

log = logging.getLogger(__name__)


class HealthOut(Schema):
    status: str
    database: str
    broker: str
    embedder: str
    llm: str


def database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except DatabaseError as error:
        connection.close_if_unusable_or_obsolete()
        return f"error: {error.__class__.__name__}"
    return "ok" if row else "error: pgvector extension missing"


def broker_status() -> str:
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
        client.ping()
    except redis.RedisError as error:
        return f"error: {error.__class__.__name__}"
    return "ok"


def embedder_status() -> str:
    from retrieval.embedding.embedders import embedder_health

    return embedder_health()


def llm_status() -> str:
    from retrieval.llm import llm_configured

    return "configured" if llm_configured() else "not configured (rule-based capture, HyDE off)"


def check() -> dict[str, str]:
    report = {
        "database": database_status(),
        "broker": broker_status(),
        "embedder": embedder_status(),
        "llm": llm_status(),
    }
    down = report["database"] != "ok" or report["broker"] != "ok"
    report["status"] = "unavailable" if down else ("ok" if report["embedder"] == "ok" else "degraded")
    return report

"""gunicorn settings shared by `make run`, bench_retrieve and the Docker image.

Callers add only where to listen and how much to log.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from typing import Any

from gunicorn import util as gunicorn_util

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
# A web worker embeds one short query at a time while other requests keep the cores busy: one
# ONNX thread each answered 4 clients faster than one per core (docs/adr/0043). Celery workers
# keep every core for their batches. Set before the settings load.
os.environ.setdefault("MEMORYHUB_EMBED_THREADS", "1")
from django.conf import settings  # noqa: E402 - after the settings module is named

from common.config import load_settings  # noqa: E402

load_settings()
workers = settings.WEB_CONCURRENCY
worker_class = "gthread"

threads = 4
timeout = 60
graceful_timeout = 10


def on_starting(server: Any) -> None:
    """gunicorn started by hand gets the embedded servers the configuration uses (once, in the master)."""
    from serving import embedded

    embedded.start_servers()


def post_worker_init(worker: Any) -> None:
    """Warm start: a worker's first retrieve as fast as its second (docs/adr/0043).

    Before taking requests: load the embedding model (its batch and query sessions), the token
    encoding and the relevance background (about a second each), then send one request through
    the whole stack in process, which imports every URL's views and schemas (about a second
    more, measured as the first calls of `bench_retrieve`), and run the hybrid statement once on
    an empty project.
    """
    from retrieval.embedding.embedders import embedder_health, warm_queries
    from retrieval.ranking.relevance import warm_up
    from retrieval.ranking.tokens import count_tokens

    count_tokens("warm up")
    embedder_health()
    warm_queries()
    warm_up()
    _warm_request_path()
    # What the worker has built so far lives as long as the worker: out of the garbage collector's
    # sight (gc.freeze), a full collection no longer walks its ~195,000 objects. At 100k memories
    # and 4 clients a full collection came about every 500 requests and held the GIL for ~110 ms,
    # stalling every request of the worker; frozen, 2.5 ms.
    gc.collect()
    gc.freeze()


def _warm_request_path() -> None:
    from django.db import DatabaseError, connection
    from django.test import Client

    from retrieval.ranking.search import SearchParams, hybrid_search

    # Unauthenticated: URL routing, middleware, ninja's parsing and the API-key lookup, no writes.
    # Its 401 is expected: not logged as an "Unauthorized" warning at every worker start.
    request_log = logging.getLogger("django.request")
    level = request_log.level
    request_log.setLevel(logging.ERROR)
    try:
        Client(HTTP_HOST="localhost").post(
            "/api/v1/retrieve", {}, content_type="application/json", headers={"Authorization": "Bearer warm-up"}
        )
    finally:
        request_log.setLevel(level)
    try:  # no project has id 0: the statement runs and finds nothing
        hybrid_search(SearchParams(project_id=0, user_id="warm-up", query="warm up", model="", vectors=None))
    except DatabaseError:
        pass  # the database may be starting; the first request pays instead
    finally:
        connection.close()  # request threads open their own


# --- gunicorn's own error answers in the API's envelope ----------------------------------------
# A request gunicorn refuses before Django sees it (a request line over `limit_request_line`:
# 414; too many or too long headers: 431; a malformed request: 400) was answered with an HTML
# page. gunicorn writes those through `gunicorn.util.write_error`; replaced here, in the master
# before the workers fork, by the same JSON envelope every API error uses, so clients parse one shape.
_GUNICORN_CODES = {400: "bad_request", 403: "forbidden", 414: "uri_too_long", 431: "headers_too_large"}


def _json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    code = _GUNICORN_CODES.get(status_int, "server_error" if status_int >= 500 else "bad_request")
    message = f"{reason}: {mesg}" if mesg else reason
    body = json.dumps({"error": {"code": code, "message": message, "details": None}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    gunicorn_util.write_nonblock(sock, head.encode("latin1") + body)


gunicorn_util.write_error = _json_error

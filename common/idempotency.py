"""``Idempotency-Key`` on the API's creating POSTs: a retried write answers the first answer.

An operation decorated with ``@idempotent`` claims the key in Redis before it runs (``SET NX``,
per project, the key hashed): the first request with a key runs and ``IdempotencyMiddleware``
stores its 2xx answer (status, body, content type) for 24 h; a later request with the same key
and the same body gets that answer back without running; the same key with another body is a
422 ``idempotency_conflict``. A request that arrives while the first is still running waits for
its answer (a few seconds), so parallel retries of one write still write once.

A non-2xx answer is not kept: nothing was written, and the client may retry with the same key.
A claim whose request died is released by its short TTL. With Redis down, the key is ignored
(the write runs, logged): a lost retry guard is better than a refused write.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from django.http import HttpRequest, HttpResponse

from common.auth import api_key
from common.errors import Conflict, Invalid
from common.redis import redis_client

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
KEEP_S = 24 * 3600
# Long enough for any single write to finish; a claim older than this belonged to a dead request.
CLAIM_S = 120
WAIT_S = 10.0
POLL_S = 0.05
MAX_KEY_CHARS = 255
_SLOT = "_memoryhub_idempotency_slot"

F = TypeVar("F", bound=Callable[..., Any])


def idempotent(view: F) -> F:
    """Make a ninja operation honour ``Idempotency-Key`` (place it under the route decorator)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        key = request.headers.get(HEADER)
        if key is None:
            return view(request, *args, **kwargs)
        replay = claim(request, key)
        if replay is not None:
            return replay
        return view(request, *args, **kwargs)

    # ninja resolves the annotations with the wrapper's module globals; give it the real types.
    wrapper.__signature__ = inspect.signature(view, eval_str=True)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def claim(request: HttpRequest, key: str) -> HttpResponse | None:
    """The stored answer for ``key`` (or None after claiming it for this request)."""
    if not key or len(key) > MAX_KEY_CHARS or not key.isascii() or not key.isprintable():
        raise Invalid(
            f"{HEADER} must be 1 to {MAX_KEY_CHARS} printable ASCII characters", code="invalid_idempotency_key"
        )
    slot = _slot_name(request, key)
    fingerprint = _fingerprint(request)
    pending = json.dumps({"state": "pending", "fingerprint": fingerprint})
    deadline = time.monotonic() + WAIT_S
    try:
        while True:
            if redis_client().set(slot, pending, nx=True, ex=CLAIM_S):
                setattr(request, _SLOT, (slot, fingerprint))
                return None
            raw = redis_client().get(slot)
            if raw is None:
                continue  # released between the two calls: claim it again
            stored = json.loads(raw)
            if stored["fingerprint"] != fingerprint:
                # A different request under a used key is the client's mistake, not a clash with stored data.
                raise Invalid(
                    f"this {HEADER} was used with a different request; use a new key for a new write",
                    code="idempotency_conflict",
                )
            if stored["state"] == "done":
                return _replay(stored)
            if time.monotonic() >= deadline:
                raise Conflict(
                    f"a request with this {HEADER} is still running; retry in a moment",
                    code="idempotency_in_progress",
                )
            time.sleep(POLL_S)
    except redis.RedisError:
        log.warning("idempotency: Redis unavailable, %s ignored for %s %s", HEADER, request.method, request.path)
        return None


def _slot_name(request: HttpRequest, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"memoryhub:idempotency:{api_key(request).project_id}:{digest}"


def _fingerprint(request: HttpRequest) -> str:
    """The request's method, path and body, the body as canonical JSON when it is JSON (a client
    may re-serialise it with its keys in another order)."""
    body = request.body
    with contextlib.suppress(ValueError):
        body = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(f"{request.method} {request.path}\n".encode() + body).hexdigest()


def _replay(stored: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(stored["body"], status=stored["status"], content_type=stored["content_type"])
    response["Idempotent-Replayed"] = "true"
    return response


def settle(request: HttpRequest, response: HttpResponse) -> None:
    """Keep a claimed request's 2xx answer for 24 h; release the claim of any other answer."""
    claimed = getattr(request, _SLOT, None)
    if claimed is None:
        return
    slot, fingerprint = claimed
    try:
        if 200 <= response.status_code < 300:
            stored = {
                "state": "done",
                "fingerprint": fingerprint,
                "status": response.status_code,
                "body": response.content.decode(),
                "content_type": response.get("Content-Type", "application/json"),
            }
            redis_client().set(slot, json.dumps(stored), ex=KEEP_S)
        else:
            redis_client().delete(slot)
    except redis.RedisError:
        log.warning("idempotency: Redis unavailable, the answer to %s %s is not kept", request.method, request.path)


class IdempotencyMiddleware:
    """Stores the answer of a request that claimed an ``Idempotency-Key`` (see ``idempotent``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        settle(request, response)
        return response

"""What the sync and async clients share: building a request from the operation table,
decoding the answer, and when to retry. No I/O here; each client sends and sleeps its own way.
"""

from __future__ import annotations

import dataclasses
import email.utils
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx2

from memoryhub_client import models
from memoryhub_client.errors import TransportError, error_for
from memoryhub_client.operations import OPERATIONS, Operation

API_PREFIX = "/api/v1"
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRY_STATUSES = frozenset({429, 503})

R = TypeVar("R")


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 429 and 503: after the server's ``Retry-After`` when it sends one, else after
    an exponential back-off with jitter. A ``Retry-After`` above ``max_wait`` is not waited
    for: the error is raised at once (``RateLimited.retry_after`` says how long)."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_wait: float = 120.0

    def wait(self, *, attempt: int, status: int, headers: httpx2.Headers) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to stop retrying."""
        if status not in RETRY_STATUSES or attempt >= self.max_retries:
            return None
        after = retry_after(headers)
        if after is not None:
            return after if after <= self.max_wait else None
        return self._backoff(attempt)

    def wait_after_transport_error(self, *, attempt: int, call: Call[Any]) -> float | None:
        """Seconds to wait before resending ``call`` after no answer at all, or None to give up.
        Only a call carrying an ``Idempotency-Key`` is resent: the lost answer may have been a
        write, and only the key makes sending it again harmless."""
        if IDEMPOTENCY_HEADER not in call.headers or attempt >= self.max_retries:
            return None
        return self._backoff(attempt)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.max_backoff, self.backoff * 2.0**attempt)
        # Half fixed, half random: clients limited together do not come back together.
        return ceiling / 2 + random.uniform(0, ceiling / 2)


NO_RETRY = RetryPolicy(max_retries=0)


def retry_after(headers: httpx2.Headers) -> float | None:
    """``Retry-After`` in seconds, from either form the header may take (seconds or HTTP date)."""
    raw = headers.get("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True)
class Server:
    """Where the client sends requests, and with which key."""

    base_url: str
    api_key: str

    def headers(self, extra: dict[str, str]) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json", **extra}


@dataclass(frozen=True)
class Call(Generic[R]):
    """One request, ready for ``httpx2.Client.request`` or its async twin. ``R`` is what its
    answer decodes to, so a client sending it returns that type (for the type checker only)."""

    operation: Operation
    method: str
    url: str
    params: dict[str, Any]
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    def request(self, server: Server) -> dict[str, Any]:
        """The keyword arguments of ``request()`` for this call to ``server``."""
        return {
            "method": self.method,
            "url": server.base_url.rstrip("/") + self.url,
            "params": self.params,
            "json": self.json,
            "content": self.content,
            "headers": server.headers(self.headers),
        }


def transport_error(error: httpx2.TransportError) -> TransportError:
    """No answer at all, as the client's exception (status 0)."""
    return TransportError(str(error) or type(error).__name__, code="transport_error", status=0)


def prepare(name: str, arguments: dict[str, Any], *, content: str | None = None) -> Call[Any]:
    """The request for operation ``name`` from a method's arguments: path parameters into the
    path, the operation's query fields into the query string, its body fields into the JSON
    body. An argument left at None is not sent (the server's default applies)."""
    operation = OPERATIONS[name]
    path = operation.path.format(
        **{
            key: quote(str(arguments[key]), safe="/" if key in operation.raw_path else "")
            for key in operation.path_params
        }
    )
    params = {key: _plain(arguments[key]) for key in operation.query if arguments.get(key) is not None}
    body = {key: _plain(arguments[key]) for key in operation.body if arguments.get(key) is not None}
    # One key per call (the caller's, else a new one), kept by every retry of it: the server
    # answers a retry with the first answer.
    key = arguments.get("idempotency_key") or uuid.uuid4().hex
    headers = {IDEMPOTENCY_HEADER: key} if operation.creates else {}
    if content is not None:
        return Call(
            operation,
            operation.method,
            API_PREFIX + path,
            params,
            content=content.encode(),
            headers={"Content-Type": operation.content_type, **headers},
        )
    json_body = body if operation.body else None
    return Call(operation, operation.method, API_PREFIX + path, params, json=json_body, headers=headers)


def _plain(value: Any) -> Any:
    """JSON-ready: dataclasses (``Link``) as dicts, dates as ISO 8601."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key: _plain(item) for key, item in dataclasses.asdict(value).items()}
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def result(call: Call[R], response: httpx2.Response) -> R:
    """The decoded answer, or the mapped exception for an error answer."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        raise error_for(response.status_code, body, retry_after=retry_after(response.headers))
    return cast(R, _decoded(call.operation.response, response))


def _decoded(kind: Any, response: httpx2.Response) -> Any:
    if kind is None:
        return None
    if kind == "text":
        return response.text
    if kind == "json":
        return response.json()
    return models.decode(kind, response.json())

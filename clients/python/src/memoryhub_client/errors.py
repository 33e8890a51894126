"""The API's error envelope as exceptions: one class per status family of docs/api.md.

Every error answer under ``/api/`` is ``{"error": {"code", "message", "details"}}``; the
status picks the class (so ``except NotFound`` works whatever the exact code), and the
envelope's ``code`` (``not_found``, ``invalid_user_id``, ``rate_limited``...) rides along.
"""

from __future__ import annotations

from typing import Any


class MemoryHubError(Exception):
    """Any error answer from the API (or none at all: ``status`` 0 for a transport failure)."""

    def __init__(self, message: str, *, code: str, status: int, details: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.message = message
        self.code = code
        self.status = status
        self.details = details


class BadRequest(MemoryHubError):
    """400: the request is malformed (not JSON, for instance)."""


class Unauthorized(MemoryHubError):
    """401: no API key, an unknown one or a revoked one."""


class NotFound(MemoryHubError):
    """404: the thing does not exist or the caller may not see it (the API does not say which)."""


class MethodNotAllowed(MemoryHubError):
    """405: the path exists but not with this method."""


class Conflict(MemoryHubError):
    """409: the change conflicts with stored data (e.g. superseding a superseded memory)."""


class PayloadTooLarge(MemoryHubError):
    """413: the body is larger than the server accepts."""


class ValidationError(MemoryHubError):
    """422: a field is missing or has a value the API refuses; ``details`` says which."""


class RateLimited(MemoryHubError):
    """429: too many requests; ``retry_after`` is the server's ``Retry-After`` in seconds."""

    def __init__(
        self, message: str, *, code: str, status: int, details: Any = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, code=code, status=status, details=details)
        self.retry_after = retry_after


class ServerError(MemoryHubError):
    """5xx other than 503: the server failed (it logged it)."""


class Unavailable(ServerError):
    """503: a dependency of the server (database, broker) is down; retrying later may work."""


class TransportError(MemoryHubError):
    """No answer at all: connection refused, timeout, broken connection (``status`` 0)."""


_BY_STATUS: dict[int, type[MemoryHubError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> MemoryHubError:
    """The exception for an error answer: its class from the status, the rest from the envelope.

    An answer that is not the envelope (a proxy's HTML page, say) still maps by status, with
    code ``http_error``.
    """
    envelope = body.get("error") if isinstance(body, dict) else None
    if not isinstance(envelope, dict):
        envelope = {}
    code = str(envelope.get("code") or "http_error")
    message = str(envelope.get("message") or f"request failed with HTTP {status}")
    details = envelope.get("details")
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else MemoryHubError)
    if cls is RateLimited:
        return RateLimited(message, code=code, status=status, details=details, retry_after=retry_after)
    return cls(message, code=code, status=status, details=details)

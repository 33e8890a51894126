"""Domain errors. Services and selectors raise these; the API maps each to the
error envelope of docs/api.md in one exception handler (memoryhub/api.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, DataError, IntegrityError, connection
from django.http import Http404, JsonResponse

log = logging.getLogger(__name__)


class DomainError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"


class Invalid(DomainError):
    status = 422
    code = "validation_error"


class RateLimited(DomainError):
    status = 429
    code = "rate_limited"


class Unavailable(DomainError):
    status = 503
    code = "unavailable"


def validation_envelope(errors: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The message and details of a ``validation_error`` for pydantic's error list: the first
    error's location (without ``body``/``query`` prefixes) and message, then every error."""
    details = [
        {"loc": [str(part) for part in e.get("loc", ())], "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in errors
    ]
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = ".".join(p for p in first["loc"] if p not in ("body", "query", "path", "payload"))
    return (f"{where}: {first['msg']}" if where else str(first["msg"])), details


def envelope_for(exc: Exception) -> tuple[int, str, str, Any] | None:
    """Status, code, message and details the API answers for an exception raised by a service,
    a selector or the database; None for an unexpected one (a 500, logged by the caller).

    The one table for every transport (the HTTP API's handlers and the MCP tools), so an
    error has the same code wherever it is raised.
    """
    if isinstance(exc, DomainError):
        return exc.status, exc.code, exc.message, exc.details
    if isinstance(exc, Http404):
        return 404, "not_found", "not found", None
    if isinstance(exc, DataError):
        # Postgres refuses some values (the parser and schemas catch the known ones first). A
        # read-back can fail too, after a write committed, so this does not claim nothing was written.
        log.warning("data error: %s", exc)
        return 422, "invalid_value", "a value cannot be stored or read back", None
    if isinstance(exc, IntegrityError):
        # A write that breaks a constraint is the client's input meeting stored data, not an
        # outage: nothing was written (the transaction rolled back).
        log.info("constraint violated: %s", exc)
        return 409, "conflict", "the change conflicts with stored data; nothing was written", None
    if isinstance(exc, DatabaseError):
        log.exception("database error")
        # A broken connection must not be reused by the next request in this worker.
        connection.close_if_unusable_or_obsolete()
        return 503, "database_unavailable", "the database is unavailable; try again shortly", None
    return None


class ApiErrorEnvelopeMiddleware:
    """Every error answer under ``/api/`` in the error envelope, whoever produced it.

    django-ninja and the API's handlers already answer ``{"error": {code, message, details}}``;
    Django itself does not for a method the route does not take (405, empty body) or for
    errors raised before a view runs. Such an answer is replaced by the envelope, keeping its
    status and headers such as ``Allow``.
    """

    CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith("/api/")
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            response = _enveloped(response, request, self.CODES.get(response.status_code, "http_error"))
        return response


def _enveloped(original: Any, request: Any, code: str) -> Any:
    status = original.status_code
    message = (
        f"{request.method} is not allowed here; allowed: {original.get('Allow', '')}"
        if status == 405
        else f"request failed with HTTP {status}"
    )
    response = JsonResponse({"error": {"code": code, "message": message, "details": None}}, status=status)
    for header in ("Allow", "Retry-After"):
        if header in original:
            response[header] = original[header]
    return response

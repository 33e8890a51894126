"""Domain errors. Services and selectors raise these; the API maps each to the
error envelope of API.md in one exception handler (memoryhub/api.py)."""

from __future__ import annotations

from typing import Any


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

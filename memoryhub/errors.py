"""Domain errors. Services and selectors raise these; the API maps each to the
error envelope of API.md in one exception handler (memoryhub/api.py)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse


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

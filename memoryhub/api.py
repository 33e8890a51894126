"""The one NinjaAPI: API-key auth, the error envelope, health, and the app routers."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer

from capture.api import router as capture_router
from common.auth import ERRORS, api_key
from common.errors import DomainError, Invalid, RateLimited, envelope_for, validation_envelope
from common.parsing import StorableJSONParser, UnstorableBody
from consolidation.api import router as consolidation_router
from conversations.api import router as conversations_router
from integrations.api import router as transfer_router
from memories import tenancy
from memories.api import router as memories_router
from memories.models import ApiKey
from memories.scratchpad_api import router as scratchpad_router
from memoryhub import erasure, health
from profiles.api import router as profiles_router
from retrieval.api import router as retrieval_router

log = logging.getLogger(__name__)


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer <key>``; the key picks the project every request acts in."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        # From here on this request's connection sees only its project's rows (row_security.py).
        return tenancy.api_key_authenticate(token=token)


api = NinjaAPI(
    title="MemoryHub API",
    version="1",
    description="Long-term memory for AI agents. The contract: docs/api.md in the repository.",
    auth=ApiKeyAuth(),
    urls_namespace="api",
    docs_url="/docs",
    parser=StorableJSONParser(),
)


def error_response(request: HttpRequest, status: int, code: str, message: str, details: Any = None) -> HttpResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return api.create_response(request, body, status=status)


@api.exception_handler(DomainError)
def on_domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    response = error_response(request, exc.status, exc.code, exc.message, exc.details)
    if isinstance(exc, RateLimited) and isinstance(exc.details, dict) and exc.details.get("retry_after"):
        response["Retry-After"] = str(exc.details["retry_after"])
    return response


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    message, details = validation_envelope([_body_located(error) for error in exc.errors])
    return error_response(request, 422, "validation_error", message, details)


def _body_located(error: dict[str, Any]) -> dict[str, Any]:
    """django-ninja locates a body error as ("body", <the operation's parameter name>, field…);
    every operation here takes its JSON body as one parameter, so that name says nothing to a
    client (it read ["body", "body", "content"]): the field is located from the body itself."""
    loc = tuple(error.get("loc", ()))
    if len(loc) >= 2 and loc[0] == "body":
        return {**error, "loc": ("body", *loc[2:])}
    return error


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(
        request, 401, "unauthorized", "missing, unknown or revoked API key (Authorization: Bearer <key>)"
    )


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, UnstorableBody):
        return error_response(request, 422, "invalid_value", str(exc.__cause__))
    if exc.status_code == 400:
        return error_response(request, 400, "malformed_request", "request body is not valid JSON")
    return error_response(request, exc.status_code, "http_error", str(exc))


@api.exception_handler(RequestDataTooBig)
def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error_response(request, 413, "payload_too_large", "request body is larger than the server accepts")


def on_stored_data_error(request: HttpRequest, exc: Exception | type[Exception]) -> HttpResponse:
    """Not found, a value Postgres refuses, a broken constraint, the database down (errors.py's table)."""
    known = envelope_for(exc) if isinstance(exc, Exception) else None
    if known is None:
        return error_response(request, 500, "internal_error", "an unexpected error occurred; it has been logged")
    return error_response(request, *known)


for _raised in (Http404, DataError, IntegrityError, DatabaseError):
    api.add_exception_handler(_raised, on_stored_data_error)


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception("unhandled error in %s %s", request.method, request.path)
    return error_response(request, 500, "internal_error", "an unexpected error occurred; it has been logged")


@api.get("/health", auth=None, tags=["health"], response={200: health.HealthOut, 503: health.HealthOut})
def get_health(request: HttpRequest) -> Status[Any]:
    """Database, broker and embedder status; 503 when the database or broker is down."""
    report = health.check()
    return Status(503 if report["status"] == "unavailable" else 200, report)


class ErasureOut(Schema):
    """What ``DELETE /users/{user_id}`` removed, per kind (the evidence of an erasure)."""

    user_id: str
    erased: dict[str, int]


@api.delete("/users/{user_id}", tags=["users"], response={200: ErasureOut, **ERRORS})
def erase_user(request: HttpRequest, user_id: str) -> dict[str, Any]:
    """Erase one end user of the key's project: memories (with revisions, links, vectors),
    conversations, capture jobs, retrieval log rows, scratchpad entries and derived cache entries.
    Irreversible; answers the counts. Other users' memories stay (a shared memory that superseded
    one of theirs keeps its text, without the pointer)."""
    if not user_id.strip() or len(user_id) > 255:
        raise Invalid("user_id must be 1 to 255 characters", code="invalid_user_id")
    counts = erasure.erase_user(project=api_key(request).project, user_id=user_id)
    return {"user_id": user_id, "erased": counts}


api.add_router("/", memories_router)
api.add_router("/", scratchpad_router)
api.add_router("/", retrieval_router)
api.add_router("/", capture_router)
api.add_router("/", conversations_router)
api.add_router("/", transfer_router)
api.add_router("/", consolidation_router)
api.add_router("/", profiles_router)

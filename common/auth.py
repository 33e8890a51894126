"""What every API router needs from a request: the authenticated key, who acted, the error shape.

The key itself is authenticated in ``memoryhub.api`` (``ApiKeyAuth``), which puts the
``memories.models.ApiKey`` row on ``request.auth``; routers in every app read it through
``api_key()`` and declare ``ERRORS`` as their documented error responses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest
from ninja import Schema

if TYPE_CHECKING:
    from memories.models import ApiKey


class ErrorBody(Schema):
    code: str
    message: str
    details: Any = None


class ErrorOut(Schema):
    """The error envelope every API answer outside 2xx has (docs/api.md "Errors")."""

    error: ErrorBody


# The error statuses every operation may answer, for the OpenAPI schema.
ERRORS: dict[int, Any] = dict.fromkeys((400, 401, 404, 409, 413, 422, 429, 503), ErrorOut)


def api_key(request: HttpRequest) -> ApiKey:
    """The API key the request authenticated with (never None behind ``ApiKeyAuth``)."""
    key = request.auth  # type: ignore[attr-defined]
    if key is None or not hasattr(key, "project_id"):
        raise AssertionError("api_key() outside an authenticated API operation")
    return key  # type: ignore[no-any-return]


def actor(request: HttpRequest) -> str:
    """How revisions and logs name whoever acted through this key."""
    return f"api_key:{api_key(request).prefix}"

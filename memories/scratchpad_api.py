"""The scratchpad endpoints of docs/api.md: per-user key-value working memory.

Keys may contain ``/`` (``task/42/plan``), hence the ``path`` converter. Django tries
URL patterns in order, so ``/scratchpad/search`` is registered before
``/scratchpad/{key}``; the key ``search`` is therefore reserved, and writes to it get
a 422 in the error envelope rather than a bare 405.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router

from common.auth import ERRORS, api_key
from common.errors import Invalid
from memories import scratchpad
from memories.models import ScratchpadEntry
from memories.schemas import ScratchpadIn, ScratchpadListOut, ScratchpadOut, UserId

router = Router(tags=["scratchpad"])


@router.get("/scratchpad/search", response={200: ScratchpadListOut, **ERRORS})
def search_scratchpad(
    request: HttpRequest,
    user_id: UserId,
    q: str = Query(..., min_length=1, max_length=1000),  # type: ignore[type-arg]
    limit: int = Query(20, ge=1, le=200),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """Entries whose key or JSON value contains every word of ``q``; key matches rank first."""
    items = scratchpad.scratchpad_search(project=api_key(request).project, user_id=user_id, q=q, limit=limit)
    return {"items": items}


@router.api_operation(["PUT", "DELETE"], "/scratchpad/search", response=ERRORS)
def reserved_search_key(request: HttpRequest) -> HttpResponse:
    """``search`` is a reserved key: writing or deleting it answers 422 ``invalid_key``
    (documented, so that the ``Allow`` header of this path lists what it answers)."""
    raise Invalid("key: 'search' is reserved", code="invalid_key")


@router.get("/scratchpad", response={200: ScratchpadListOut, **ERRORS})
def list_scratchpad(
    request: HttpRequest,
    user_id: UserId,
    prefix: str = Query("", max_length=255),  # type: ignore[type-arg]
    limit: int = Query(100, ge=1, le=1000),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """The user's entries whose key starts with ``prefix``, sorted by key."""
    items = scratchpad.scratchpad_list(project=api_key(request).project, user_id=user_id, prefix=prefix, limit=limit)
    return {"items": items}


@router.put("/scratchpad/{path:key}", response={200: ScratchpadOut, **ERRORS})
def put_scratchpad(request: HttpRequest, key: str, body: ScratchpadIn) -> ScratchpadEntry:
    """Create or overwrite one key (last write wins)."""
    return scratchpad.scratchpad_put(project=api_key(request).project, user_id=body.user_id, key=key, value=body.value)


@router.get("/scratchpad/{path:key}", response={200: ScratchpadOut, **ERRORS})
def get_scratchpad(request: HttpRequest, key: str, user_id: UserId) -> ScratchpadEntry:
    """One key of the user's scratchpad."""
    return scratchpad.scratchpad_get(project=api_key(request).project, user_id=user_id, key=key)


@router.delete("/scratchpad/{path:key}", response={204: None, **ERRORS})
def delete_scratchpad(request: HttpRequest, key: str, user_id: UserId) -> HttpResponse:
    """Delete one key of the user's scratchpad."""
    scratchpad.scratchpad_delete(project=api_key(request).project, user_id=user_id, key=key)
    return HttpResponse(status=204)

"""The memory endpoints of docs/api.md. Operations stay thin: parse, call a service or
selector, shape the answer. Isolation is the selectors' job."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from common.auth import ERRORS, actor, api_key
from common.idempotency import idempotent
from memories import lifecycle, selectors, services
from memories.models import Memory, Project
from memories.schemas import (
    BulkIn,
    BulkOut,
    HistoryOut,
    KindName,
    MemoryIn,
    MemoryListQuery,
    MemoryOut,
    MemoryPageOut,
    MemoryPatch,
    MemoryWriteOut,
    ScopeName,
    StatusName,
    SupersedeIn,
    UserId,
    indexing_out,
    memory_out,
    memory_write_out,
)

router = Router(tags=["memories"])


def _fresh(request: HttpRequest, user_id: str, memory_id: Any) -> dict[str, Any]:
    """Re-read through the selector so the answer shows links and successor as stored."""
    memory = selectors.memory_get_visible(project=api_key(request).project, user_id=user_id, memory_id=memory_id)
    return memory_out(memory)


def write_out(request: HttpRequest, user_id: str, memory: Memory, *, created: bool) -> dict[str, Any]:
    """A write's answer (``MemoryWriteOut``), re-read as stored so ``embedding_status`` is not stale."""
    stored = selectors.memory_get_visible(project=api_key(request).project, user_id=user_id, memory_id=memory.pk)
    return memory_write_out(stored, created=created, profiles=apps.is_installed("profiles"))


def memory_draft(body: MemoryIn | SupersedeIn, *, scope: str, inherit: Memory | None = None) -> services.MemoryDraft:
    """The service's draft for a create or supersede body (every transport builds it here).

    With ``inherit`` (the memory a new version replaces), the kind, category and importance the
    body leaves out are that memory's, not the schema's defaults.
    """
    given = body.model_fields_set

    def field(name: str) -> Any:
        return getattr(inherit, name) if inherit is not None and name not in given else getattr(body, name)

    return services.MemoryDraft(
        user_id=body.user_id,
        content=body.content,
        kind=field("kind"),
        category=field("category"),
        scope=scope,
        importance=field("importance"),
        metadata=body.metadata,
        expires_at=body.expires_at,
        related=[(item.id, item.relationship) for item in body.related],
    )


@router.post("/memories", response={201: MemoryWriteOut, 200: MemoryWriteOut, **ERRORS})
@idempotent
def create_memory(request: HttpRequest, body: MemoryIn) -> Status[Any]:
    """Create one memory. It is embedded before the answer when the embedder is up. The same
    content as an active memory of the user is not stored again: 200 with that memory,
    ``created: false`` and ``duplicate_of``."""
    memory, created = memory_create_from(project=api_key(request).project, body=body, actor=actor(request))
    return Status(201 if created else 200, write_out(request, body.user_id, memory, created=created))


def memory_create_from(*, project: Project, body: MemoryIn, actor: str) -> tuple[Memory, bool]:
    """POST /memories for any transport: create (unless it repeats an active memory), or supersede
    when ``supersedes`` names a memory. Returns the memory and whether it was stored now."""
    if body.supersedes:
        # The same operation as POST /memories/{id}/supersede: a scope left out is the old one's.
        scope = body.scope if "scope" in body.model_fields_set else None
        new = memory_supersede_from(
            project=project, memory_id=body.supersedes, body=body, scope=scope, reason="", actor=actor
        )
        return new, True
    return services.memory_create_once(project=project, draft=memory_draft(body, scope=body.scope), actor=actor)


def memory_supersede_from(
    *, project: Project, memory_id: str, body: MemoryIn | SupersedeIn, scope: str | None, reason: str, actor: str
) -> Memory:
    """A new version of a memory the body's user may see (a scope left out is the old one's)."""
    old = selectors.memory_get_visible(project=project, user_id=body.user_id, memory_id=memory_id)
    draft = memory_draft(body, scope=scope or old.scope, inherit=old)
    return services.memory_supersede(memory=old, draft=draft, actor=actor, reason=reason)


@router.post("/memories/bulk", response={201: BulkOut, **ERRORS})
@idempotent
def bulk_create_memories(request: HttpRequest, body: BulkIn) -> Status[Any]:
    """Create up to 1,000 memories at once, all or nothing; embedding runs in the background."""
    drafts = [services.MemoryDraft(**item.model_dump()) for item in body.memories]
    memories = services.memory_bulk_create(project=api_key(request).project, drafts=drafts, actor=actor(request))
    # Bulk memories are embedded by the worker: none is found by meaning yet.
    indexing = indexing_out(memories, changed=bool(memories), profiles=apps.is_installed("profiles"))
    return Status(201, {"ids": [str(m.pk) for m in memories], "indexing": indexing})


@router.get("/memories", response={200: MemoryPageOut, **ERRORS})
def list_memories(
    request: HttpRequest,
    user_id: UserId,
    kind: KindName | None = None,
    category: str | None = None,
    scope: ScopeName | None = None,
    status: StatusName | None = None,
    q: str | None = None,
    limit: int = Query(50, ge=1, le=200),  # type: ignore[type-arg]
    cursor: str | None = None,
) -> dict[str, Any]:
    """One user's visible memories, newest first, with cursor pagination."""
    # Plain parameters, not Query[MemoryListQuery], keep the OpenAPI document as it was; the
    # values already passed the same constraints, so building the schema cannot fail.
    query = MemoryListQuery(
        user_id=user_id, kind=kind, category=category, scope=scope, status=status, q=q, limit=limit, cursor=cursor
    )
    return memory_page(project=api_key(request).project, query=query)


def memory_page(*, project: Project, query: MemoryListQuery) -> dict[str, Any]:
    """GET /memories for any transport: one page of the user's visible memories (``MemoryPageOut``)."""
    filters = selectors.MemoryFilters(
        kind=query.kind, category=query.category, scope=query.scope, status=query.status, q=query.q
    )
    page = selectors.memories_for_user(
        project=project, user_id=query.user_id, filters=filters, limit=query.limit, cursor=query.cursor
    )
    return {"items": [memory_out(m) for m in page.items], "next_cursor": page.next_cursor}


@router.get("/memories/{memory_id}", response={200: MemoryOut, **ERRORS})
def get_memory(request: HttpRequest, memory_id: str, user_id: UserId) -> dict[str, Any]:
    """One memory, if the user may see it."""
    return _fresh(request, user_id, memory_id)


@router.patch("/memories/{memory_id}", response={200: MemoryOut, **ERRORS})
def edit_memory(request: HttpRequest, memory_id: str, body: MemoryPatch) -> dict[str, Any]:
    """Edit fields of a memory; every change is recorded as a revision."""
    memory = selectors.memory_get_visible(project=api_key(request).project, user_id=body.user_id, memory_id=memory_id)
    changes = body.model_dump(exclude_unset=True, exclude={"user_id", "reason"})
    services.memory_edit(memory=memory, changes=changes, actor=actor(request), reason=body.reason)
    return _fresh(request, body.user_id, memory.pk)


@router.delete("/memories/{memory_id}", response={204: None, **ERRORS})
def delete_memory(request: HttpRequest, memory_id: str, user_id: UserId) -> HttpResponse:
    """Soft delete: gone from every read; the history stays."""
    memory = selectors.memory_get_visible(project=api_key(request).project, user_id=user_id, memory_id=memory_id)
    lifecycle.memory_delete(memory=memory, actor=actor(request))
    return HttpResponse(status=204)


@router.get("/memories/{memory_id}/history", response={200: HistoryOut, **ERRORS})
def memory_history(request: HttpRequest, memory_id: str, user_id: UserId) -> dict[str, Any]:
    """Every revision, and the supersede chain oldest to newest."""
    memory = selectors.memory_get_visible(project=api_key(request).project, user_id=user_id, memory_id=memory_id)
    revisions, chain = selectors.memory_history(memory=memory, user_id=user_id)
    return {
        "revisions": [
            {
                "id": r.pk,
                "action": r.action,
                "before": r.before,
                "after": r.after,
                "actor": r.actor,
                "reason": r.reason,
                "created_at": r.created_at,
            }
            for r in revisions
        ],
        "chain": [memory_out(m) for m in chain],
    }


@router.post("/memories/{memory_id}/supersede", response={201: MemoryWriteOut, **ERRORS})
@idempotent
def supersede_memory(request: HttpRequest, memory_id: str, body: SupersedeIn) -> Status[Any]:
    """Write a new version; the old one becomes ``superseded`` (409 if it already is). What the
    body leaves out (kind, category, scope, importance) is the old version's."""
    new = memory_supersede_from(
        project=api_key(request).project,
        memory_id=memory_id,
        body=body,
        scope=body.scope,
        reason=body.reason,
        actor=actor(request),
    )
    return Status(201, write_out(request, body.user_id, new, created=True))

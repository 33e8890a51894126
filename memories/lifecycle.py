"""A memory's status changes: superseded (``retire``), archived, deleted, restored, and what rests
on a memory that stops being current going back to review (dependent invalidation,
docs/adr/0094-dependent-invalidation.md).

Every way a memory stops being current ends in :func:`retire` or :func:`set_status`, so the
dependents are handled in one place; the other write modules call them inside their own
transactions.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from common.errors import Conflict
from memories.edges import create_edge, edge_target
from memories.history import record_revision, snapshot
from memories.models import Memory, MemoryEdge, Relationship, Status


def retire(
    old: Memory,
    *,
    successor: Memory,
    actor: str,
    reason: str,
    metadata: dict[str, Any] | None = None,
    what: str = "superseded",
) -> None:
    """Mark ``old`` superseded by ``successor`` (saved, with ``supersedes`` set, or linked by a
    consolidation): revision and edge; what rests on ``old`` goes back to review."""
    before = snapshot(old)
    old.status = Status.SUPERSEDED
    if metadata is not None:
        old.metadata = metadata
    old.save(update_fields=["status", "metadata", "updated_at"])
    record_revision(old, action="superseded", before=before, actor=actor, reason=reason)
    create_edge(successor, old, relationship=Relationship.SUPERSEDES, actor=actor)
    _return_dependents_to_review(old, actor=actor, what=what)


# --- Dependent invalidation ------------------------------------------------------------------

# Links that say their source rests on their target (``from_memory`` derived from / depends on
# ``to_memory``).
DEPENDENT_RELATIONSHIPS = (Relationship.DERIVED_FROM, Relationship.DEPENDS_ON)
RESTS_ON_CHANGED = "what it rests on changed"
RETURN_TO_REVIEW = "return_to_review"


def _return_dependents_to_review(source: Memory, *, actor: str, what: str) -> list[Memory]:
    """Every active memory linked to ``source`` as derived from it or depending on it waits for
    review again, with the reason "what it rests on changed" (docs/adr/0094-dependent-invalidation.md).

    The one place this happens: every way a memory stops being current (superseded, merged,
    deleted, archived) goes through ``retire`` or ``set_status``, which call this inside their
    transaction. A dependent already waiting, superseded or gone is left as it is; the review
    decides what becomes of it (approve: active again, reject: deleted, which returns what rests
    on it in turn)."""
    rests_on = MemoryEdge.objects.filter(to_memory=source, relationship__in=DEPENDENT_RELATIONSHIPS)
    dependents = list(
        Memory.objects.select_for_update()
        .filter(pk__in=rests_on.values("from_memory_id"), status=Status.ACTIVE)
        .order_by("pk")
    )
    for dependent in dependents:
        before = snapshot(dependent)
        dependent.status = Status.PENDING_REVIEW
        dependent.save(update_fields=["status", "updated_at"])
        reason = f"{RESTS_ON_CHANGED}: {edge_target(dependent, source)} was {what}"
        record_revision(dependent, action=RETURN_TO_REVIEW, before=before, actor=actor, reason=reason)
    return dependents


def restore_dependents(source: Memory, *, actor: str, reason: str) -> None:
    """Undo of ``_return_dependents_to_review``: the dependents of ``source`` still waiting since
    it sent them back (their last revision is that one) are active again."""
    rests_on = MemoryEdge.objects.filter(to_memory=source, relationship__in=DEPENDENT_RELATIONSHIPS)
    waiting = Memory.objects.select_for_update().filter(
        pk__in=rests_on.values("from_memory_id"), status=Status.PENDING_REVIEW
    )
    for dependent in waiting.order_by("pk"):
        last = dependent.revisions.order_by("-created_at", "-id").first()
        if last is None or last.action != RETURN_TO_REVIEW:
            continue
        before = snapshot(dependent)
        dependent.status = Status.ACTIVE
        dependent.save(update_fields=["status", "updated_at"])
        record_revision(dependent, action="restore", before=before, actor=actor, reason=reason)


FORGETTING: dict[str, str] = {Status.DELETED.value: "deleted", Status.ARCHIVED.value: "archived"}


def set_status(memory: Memory, *, status: str, action: str, actor: str, reason: str = "") -> Memory:
    """Move ``memory`` to ``status`` in its own transaction; forgetting it returns its dependents to review."""
    with transaction.atomic(durable=True):
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        before = snapshot(memory)
        memory.status = status
        memory.deleted_at = timezone.now() if status == Status.DELETED else None
        memory.save(update_fields=["status", "deleted_at", "updated_at"])
        record_revision(memory, action=action, before=before, actor=actor, reason=reason)
        if status in FORGETTING and before["status"] != status:
            _return_dependents_to_review(memory, actor=actor, what=FORGETTING[status])
    return memory


def memory_archive(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Take a memory out of retrieval without deleting it."""
    return set_status(memory, status=Status.ARCHIVED, action="archive", actor=actor, reason=reason)


def memory_delete(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Soft delete: the row and its history stay; nothing reads it any more."""
    return set_status(memory, status=Status.DELETED, action="delete", actor=actor, reason=reason)


def memory_restore(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Bring back a deleted or archived memory in the state it had before."""
    if memory.status not in (Status.DELETED, Status.ARCHIVED):
        raise Conflict("only deleted or archived memories can be restored", code="not_restorable")
    last = memory.revisions.filter(action__in=("delete", "archive")).order_by("-created_at", "-id").first()
    previous = (last.before.get("status") if last else None) or Status.ACTIVE
    if previous in (Status.DELETED, Status.ARCHIVED):
        previous = Status.ACTIVE
    if previous == Status.ACTIVE and Memory.objects.filter(supersedes=memory).exists():
        previous = Status.SUPERSEDED
    return set_status(memory, status=previous, action="restore", actor=actor, reason=reason)

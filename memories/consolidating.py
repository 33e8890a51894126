"""Consolidation's writes: merging and superseding memories that already exist, and undoing
either (consolidation/services.py decides; these write. docs/adr/0093-consolidation.md).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from common.errors import Conflict, NotFound
from memories.history import record_revision, snapshot
from memories.lifecycle import restore_dependents, retire
from memories.models import Memory, MemoryEdge, Relationship, Status

MERGED_INTO = "merged_into"


def _consolidation_pair(first_id: Any, second_id: Any) -> tuple[Memory, Memory]:
    """Lock two active memories of one owner and scope (in id order, so two runs cannot deadlock);
    Conflict when either has changed since it was judged (another status, a successor of its own)."""
    locked = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=sorted([first_id, second_id]))}
    first, second = locked.get(first_id), locked.get(second_id)
    if first is None or second is None or first.pk == second.pk:
        raise Conflict("these memories are no longer there", code="not_consolidatable")
    same_owner = (
        first.project_id == second.project_id and first.scope == second.scope and first.user_id == second.user_id
    )
    if not same_owner:
        raise NotFound("memory not found")
    if first.status != Status.ACTIVE or second.status != Status.ACTIVE:
        raise Conflict("one of these memories is no longer active", code="not_consolidatable")
    if Memory.objects.filter(supersedes__in=[first, second]).exists():
        raise Conflict("one of these memories has a successor now", code="not_consolidatable")
    return first, second


def memory_merge_into(*, survivor: Memory, merged: Memory, actor: str, reason: str = "") -> Memory:
    """Merge a near-duplicate: ``merged`` is superseded by ``survivor`` with the reason "merged"
    (status ``superseded``, ``metadata.merged_into``, a ``supersedes`` link from the survivor);
    nothing is deleted and no text changes. The survivor's own chain stays as it is, so the
    merged memory is not made a version of it. Returns the survivor."""
    with transaction.atomic(durable=True):
        keep, gone = _consolidation_pair(survivor.pk, merged.pk)
        why = f"merged into {keep.pk}" + (f": {reason}" if reason else "")
        metadata = {**(gone.metadata or {}), MERGED_INTO: str(keep.pk)}
        retire(gone, successor=keep, actor=actor, reason=why, metadata=metadata, what="merged")
        record_revision(
            keep, action="merge", before=snapshot(keep), actor=actor, reason=f"merged {gone.pk} into this memory"
        )
    return keep


def memory_supersede_existing(*, old: Memory, new: Memory, actor: str, reason: str = "") -> Memory:
    """Make ``new``, an active memory written after ``old``, the current version of ``old``'s
    chain (``supersedes`` and version set, ``old`` superseded), as if it had been written as its
    successor. When ``new`` already continues a chain of its own, ``old`` is superseded by it with
    the link alone (a memory has one predecessor). Returns ``new``."""
    try:
        with transaction.atomic(durable=True):
            head, gone = _consolidation_pair(new.pk, old.pk)
            before = snapshot(head)
            if head.supersedes_id is None:
                head.supersedes, head.version = gone, gone.version + 1
                head.save(update_fields=["supersedes", "version", "updated_at"])
            record_revision(head, action="supersede", before=before, actor=actor, reason=reason)
            retire(gone, successor=head, actor=actor, reason=reason)
    except IntegrityError as error:  # a concurrent supersede of the same memory won the race
        raise Conflict("that memory has already been superseded", code="already_superseded") from error
    return head


def memory_unconsolidate(*, survivor: Memory, retired: Memory, version: int, actor: str, reason: str = "") -> Memory:
    """Undo ``memory_merge_into`` or ``memory_supersede_existing``: ``retired`` is active again,
    ``survivor`` back at ``version`` without the link, and the dependents ``retired`` sent to
    review are active again if still waiting. New revisions record the undo. Conflict when
    either memory has moved on since (the survivor superseded or gone, the retired one changed).
    Returns ``retired``."""
    with transaction.atomic(durable=True):
        locked = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=sorted([survivor.pk, retired.pk]))}
        keep, gone = locked.get(survivor.pk), locked.get(retired.pk)
        link = MemoryEdge.objects.filter(
            from_memory=survivor.pk, to_memory=retired.pk, relationship=Relationship.SUPERSEDES
        )
        if (
            keep is None
            or gone is None
            or keep.status != Status.ACTIVE
            or gone.status != Status.SUPERSEDED
            or Memory.objects.filter(supersedes=keep).exists()
            or Memory.objects.filter(supersedes=gone).exclude(pk=keep.pk).exists()
            or not link.exists()
        ):
            raise Conflict("these memories have changed since they were consolidated", code="not_undoable")
        before = snapshot(keep)
        if keep.supersedes_id == gone.pk:
            keep.supersedes, keep.version = None, version
            keep.save(update_fields=["supersedes", "version", "updated_at"])
        link.delete()
        record_revision(keep, action="unconsolidate", before=before, actor=actor, reason=reason)
        before = snapshot(gone)
        gone.status = Status.ACTIVE
        gone.metadata = {k: v for k, v in (gone.metadata or {}).items() if k != MERGED_INTO}
        gone.save(update_fields=["status", "metadata", "updated_at"])
        record_revision(gone, action="restore", before=before, actor=actor, reason=reason)
        restore_dependents(gone, actor=actor, reason=reason)
    return gone

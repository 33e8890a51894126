"""Review decisions on memories waiting for review: approve (completing a supersede capture
proposed), approve as the successor of another memory ("supersede that one instead"), merge a
proposal into an existing memory, and the undo of an approval or a merge
(docs/adr/0049-review-queue-collisions-merge-undo.md). Rejecting is ``lifecycle.memory_delete``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from common.errors import Conflict
from memories.history import notify_content_change, record_revision, snapshot
from memories.lifecycle import retire, set_status
from memories.models import EmbeddingStatus, Memory, MemoryEdge, Relationship, Scope, Status
from memories.services import content_hash, draft_from, validate_draft


def memory_approve(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Approve a memory waiting for review: it becomes active (and retrievable).

    When capture proposed it as the successor of another memory
    (``metadata.proposed_supersedes``), approval completes that supersede if the old memory
    is still the active head of its chain, with the same owner and scope; otherwise the
    memory is approved on its own.
    """
    if memory.status != Status.PENDING_REVIEW:
        raise Conflict("only memories waiting for review can be approved", code="not_pending_review")
    proposed = (memory.metadata or {}).get("proposed_supersedes")
    if not proposed:
        return set_status(memory, status=Status.ACTIVE, action="approve", actor=actor, reason=reason)
    try:
        with transaction.atomic(durable=True):
            new = Memory.objects.select_for_update().get(pk=memory.pk)
            if new.status != Status.PENDING_REVIEW:
                raise Conflict("only memories waiting for review can be approved", code="not_pending_review")
            old = _proposed_predecessor(new, proposed)
            before = snapshot(new)
            new.status = Status.ACTIVE
            if old is not None:
                new.supersedes, new.version = old, old.version + 1
            new.save(update_fields=["status", "supersedes", "version", "updated_at"])
            if old is not None:
                retire(old, successor=new, actor=actor, reason=reason)
            record_revision(new, action="approve", before=before, actor=actor, reason=reason)
    except IntegrityError as error:  # a concurrent supersede of the same memory won the race
        message = "the memory it would supersede has already been superseded"
        raise Conflict(message, code="already_superseded") from error
    return new


def _proposed_predecessor(memory: Memory, proposed: Any) -> Memory | None:
    """The active memory ``memory`` may supersede on approval, locked; None if it no longer can."""
    try:
        old = Memory.objects.select_for_update().get(pk=str(proposed), project_id=memory.project_id)
    except (Memory.DoesNotExist, ValueError, ValidationError):
        return None
    same_owner = old.scope == memory.scope and (old.scope == Scope.PROJECT or old.user_id == memory.user_id)
    has_successor = Memory.objects.filter(supersedes=old).exists()
    return old if same_owner and old.status == Status.ACTIVE and not has_successor else None


def _pending_and_target(proposal_id: Any, target_id: Any) -> tuple[Memory, Memory]:
    """Lock a proposal waiting for review and an active memory of the same owner; Conflict otherwise."""
    new = Memory.objects.select_for_update().get(pk=proposal_id)
    if new.status != Status.PENDING_REVIEW:
        raise Conflict("only memories waiting for review can be approved", code="not_pending_review")
    old = _proposed_predecessor(new, target_id)
    if old is None:
        raise Conflict("that memory is no longer an active memory of the same end user", code="target_not_supersedable")
    return new, old


def memory_approve_superseding(*, memory: Memory, target: Memory, actor: str, reason: str = "") -> Memory:
    """Approve a proposal as the successor of ``target`` (the reviewer's "supersede that one
    instead"): like approving a capture-proposed supersede, but refused (Conflict) when
    ``target`` can no longer be superseded, never silently approved on its own."""
    try:
        with transaction.atomic(durable=True):
            new, old = _pending_and_target(memory.pk, target.pk)
            before = snapshot(new)
            new.status, new.supersedes, new.version = Status.ACTIVE, old, old.version + 1
            new.save(update_fields=["status", "supersedes", "version", "updated_at"])
            retire(old, successor=new, actor=actor, reason=reason)
            record_revision(new, action="approve", before=before, actor=actor, reason=reason)
    except IntegrityError as error:  # a concurrent supersede of the same memory won the race
        raise Conflict("that memory has already been superseded", code="already_superseded") from error
    return new


def memory_merge_proposal(*, memory: Memory, target: Memory, content: str, actor: str) -> Memory:
    """Merge a proposal into an existing memory: ``target`` is edited to ``content`` (the
    combined text) and the proposal is rejected, both in one transaction, each with a
    revision naming the other. Returns the edited ``target``."""
    with transaction.atomic(durable=True):
        proposal, old = _pending_and_target(memory.pk, target.pk)
        draft = validate_draft(project=old.project, draft=draft_from(old, {"content": content}))
        before = snapshot(old)
        old.content, old.content_hash = draft.content, content_hash(draft.content)
        old.embedding_status = EmbeddingStatus.PENDING
        old.save()
        record_revision(old, action="edit", before=before, actor=actor, reason=f"merged with proposal {proposal.pk}")
        before = snapshot(proposal)
        proposal.status, proposal.deleted_at = Status.DELETED, timezone.now()
        proposal.save(update_fields=["status", "deleted_at", "updated_at"])
        record_revision(proposal, action="delete", before=before, actor=actor, reason=f"merged into {old.pk}")
    notify_content_change([old], inline=True)
    return old


def memory_return_to_review(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Undo an approval: the memory waits for review again. When the approval superseded
    another memory, that one becomes active again and the supersede link goes. Conflict
    once the memory has moved on (another status, or a successor of its own)."""
    with transaction.atomic(durable=True):
        new = Memory.objects.select_for_update().get(pk=memory.pk)
        if new.status != Status.ACTIVE or Memory.objects.filter(supersedes=new).exists():
            raise Conflict("this memory has changed since it was approved", code="not_undoable")
        old = Memory.objects.select_for_update().filter(pk=new.supersedes_id).first() if new.supersedes_id else None
        before = snapshot(new)
        new.status, new.supersedes, new.version = Status.PENDING_REVIEW, None, 1
        new.save(update_fields=["status", "supersedes", "version", "updated_at"])
        record_revision(new, action="unapprove", before=before, actor=actor, reason=reason)
        if old is not None and old.status == Status.SUPERSEDED:
            MemoryEdge.objects.filter(from_memory=new, to_memory=old, relationship=Relationship.SUPERSEDES).delete()
            before = snapshot(old)
            old.status = Status.ACTIVE
            old.save(update_fields=["status", "updated_at"])
            record_revision(old, action="restore", before=before, actor=actor, reason=reason)
    return new


def memory_unmerge(
    *, memory: Memory, target: Memory, merged: str, content: str, actor: str, reason: str = ""
) -> Memory:
    """Undo a merge: ``target`` (still reading ``merged``) gets back its ``content`` and the
    proposal waits for review again (a new revision each: history keeps the merge and its
    undo). Conflict when either has changed since the merge."""
    with transaction.atomic(durable=True):
        proposal = Memory.objects.select_for_update().get(pk=memory.pk)
        old = Memory.objects.select_for_update().get(pk=target.pk)
        if proposal.status != Status.DELETED or old.status != Status.ACTIVE or old.content != merged:
            raise Conflict("these memories have changed since the merge", code="not_undoable")
        before = snapshot(old)
        old.content, old.content_hash = content, content_hash(content)
        old.embedding_status = EmbeddingStatus.PENDING
        old.save()
        record_revision(old, action="edit", before=before, actor=actor, reason=reason)
        before = snapshot(proposal)
        proposal.status, proposal.deleted_at = Status.PENDING_REVIEW, None
        proposal.save(update_fields=["status", "deleted_at", "updated_at"])
        record_revision(proposal, action="restore", before=before, actor=actor, reason=reason)
    notify_content_change([old], inline=True)
    return old

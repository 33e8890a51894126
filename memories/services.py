"""Writes to the memory domain. The API, the UI, Celery tasks and management
commands all call these; none of them re-implements a rule.

Each public service is the outermost transaction (``durable=True``) and queues
background work on commit, so a worker never reads uncommitted rows. Every change
writes a :class:`MemoryRevision` naming its actor (``api_key:<prefix>``,
``user:<username>``, ``system:<what>`` or ``classifier:<job>``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from common.errors import Conflict, Invalid, NotFound, PayloadTooLarge
from common.redaction import is_mostly_secret, redact, redact_json
from memories.models import (
    EmbeddingStatus,
    Kind,
    Memory,
    MemoryEdge,
    MemoryRevision,
    Project,
    Relationship,
    Scope,
    Status,
)
from memories.selectors import memory_active_duplicate, memory_get_visible

# Fields a revision snapshots, and the ones an edit may change.
SNAPSHOT_FIELDS = ("content", "kind", "category", "scope", "importance", "metadata", "status", "version", "expires_at")
EDITABLE_FIELDS = frozenset({"content", "kind", "category", "importance", "metadata", "expires_at"})

# Hooks other apps register (retrieval embeds; capture queues tasks). Keeping them as
# plain callables keeps this module free of imports from those apps.
after_content_change: list[Callable[[Sequence[Memory], bool], None]] = []
# Called after the commit of any change to a memory, with (project id, user id, scope): the
# profiles app rebuilds what rests on that user's (or, for a shared memory, the project's) memories.
after_user_change: list[Callable[[int, str, str], None]] = []


@dataclass
class MemoryDraft:
    """What a caller wants stored; validated by :func:`validate_draft`."""

    user_id: str
    content: str
    kind: str = Kind.FACT
    category: str = ""
    scope: str = Scope.USER
    importance: float = 0.5
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    source: dict[str, Any] | None = None
    related: list[tuple[str, str]] = field(default_factory=list)


def content_hash(content: str) -> str:
    """sha256 of the whitespace- and case-normalised content (duplicate detection)."""
    normalised = " ".join(content.split()).casefold()
    return hashlib.sha256(normalised.encode()).hexdigest()


def validate_draft(*, project: Project, draft: MemoryDraft) -> MemoryDraft:
    """Check a draft against the project's rules; raise Invalid / PayloadTooLarge."""
    draft.content = draft.content.strip()
    if not draft.content:
        raise Invalid("content must not be empty or whitespace only", code="empty_content")
    # Secrets never reach storage (common/redaction.py): one that is the whole point of the
    # content is refused; one inside a fact is replaced by [REDACTED], as capture does.
    redacted, secrets = redact(draft.content)
    if secrets and is_mostly_secret(draft.content):  # the common case (no secret) scans once
        raise Invalid(
            "content is a credential or other secret; MemoryHub does not store secrets", code="secret_content"
        )
    draft.content = redacted
    draft.metadata = redact_json(draft.metadata)
    limit = settings.MEMORYHUB_MAX_CONTENT_CHARS
    if len(draft.content) > limit:
        raise PayloadTooLarge(
            f"content is {len(draft.content)} characters; the limit is {limit}", code="content_too_large"
        )
    validate_metadata(draft.metadata)
    validate_category(project=project, category=draft.category)
    if not 0 <= draft.importance <= 1:
        raise Invalid("importance must be between 0 and 1", code="invalid_importance")
    return draft


#: Metadata is for small annotations (a source, a tag, a score), not documents: eight 10 MB
#: metadata writes made one list call answer 84 MB and grew each worker by ~200 MB for good.
MAX_METADATA_BYTES = 16_384


def validate_metadata(metadata: dict[str, Any] | None) -> None:
    """Raise PayloadTooLarge when ``metadata`` serialises to more than ``MAX_METADATA_BYTES``."""
    size = len(json.dumps(metadata or {}, ensure_ascii=False, default=str).encode())
    if size > MAX_METADATA_BYTES:
        raise PayloadTooLarge(
            f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}", code="metadata_too_large"
        )


def validate_category(*, project: Project, category: str) -> None:
    if category and category not in project.taxonomy:
        raise Invalid(
            f"unknown category {category!r}",
            code="unknown_category",
            details={"allowed": list(project.taxonomy)},
        )


def snapshot(memory: Memory) -> dict[str, Any]:
    """The JSON-safe state of a memory that revisions record."""
    state = {name: getattr(memory, name) for name in SNAPSHOT_FIELDS}
    state["expires_at"] = memory.expires_at.isoformat() if memory.expires_at else None
    return state


def _revision(memory: Memory, *, action: str, before: dict[str, Any], actor: str, reason: str = "") -> None:
    MemoryRevision.objects.create(
        memory=memory, action=action, before=before, after=snapshot(memory), actor=actor, reason=reason
    )
    _user_changed(memory.project_id, memory.user_id, memory.scope)


def _user_changed(project_id: int, user_id: str, scope: str) -> None:
    """Run the ``after_user_change`` hooks once the surrounding transaction commits (every change
    writes a revision, so every change comes through here)."""

    def notify() -> None:
        for hook in after_user_change:
            hook(project_id, user_id, scope)

    if after_user_change:
        transaction.on_commit(notify)


def _new_memory(
    *, project: Project, draft: MemoryDraft, actor: str, status: str, version: int = 1, supersedes: Memory | None = None
) -> Memory:
    return Memory(
        project=project,
        user_id=draft.user_id,
        scope=draft.scope,
        kind=draft.kind,
        category=draft.category,
        content=draft.content,
        content_hash=content_hash(draft.content),
        importance=draft.importance,
        metadata=draft.metadata,
        expires_at=draft.expires_at,
        source=draft.source,
        status=status,
        version=version,
        supersedes=supersedes,
        created_by=actor,
    )


def _notify_content_change(memories: Sequence[Memory], *, inline: bool) -> None:
    for hook in after_content_change:
        hook(memories, inline)


def memory_create(
    *, project: Project, draft: MemoryDraft, actor: str, status: str = Status.ACTIVE, embed_inline: bool = True
) -> Memory:
    """Store one memory (and its ``related`` links) and record its first revision."""
    validate_draft(project=project, draft=draft)
    with transaction.atomic(durable=True):
        memory = _new_memory(project=project, draft=draft, actor=actor, status=status)
        memory.save()
        _revision(memory, action="create", before={}, actor=actor)
        _link_related(memory, draft.related, actor=actor)
    _notify_content_change([memory], inline=embed_inline)
    return memory


def memory_create_once(*, project: Project, draft: MemoryDraft, actor: str) -> tuple[Memory, bool]:
    """Store ``draft`` unless it repeats an active memory word for word (after the whitespace and
    case normalisation of :func:`content_hash`, which capture's duplicate check uses too).

    Returns the memory and whether it is new; a repeat answers the memory that was already there.
    Two identical requests at the same instant may still both store (no lock is taken): the
    repeat this guards against is an agent saying the same thing again on a later turn.
    """
    validate_draft(project=project, draft=draft)
    same = memory_active_duplicate(
        project=project, user_id=draft.user_id, scope=draft.scope, content_hash=content_hash(draft.content)
    )
    if same is not None:
        return same, False
    return memory_create(project=project, draft=draft, actor=actor), True


def memory_bulk_create(*, project: Project, drafts: Sequence[MemoryDraft], actor: str) -> list[Memory]:
    """Store many memories in one transaction; all or nothing. Embedding runs in the background."""
    if len(drafts) > settings.MEMORYHUB_MAX_BULK:
        raise PayloadTooLarge(
            f"{len(drafts)} memories in one request; the limit is {settings.MEMORYHUB_MAX_BULK}", code="bulk_too_large"
        )
    for index, draft in enumerate(drafts):
        try:
            validate_draft(project=project, draft=draft)
        except (Invalid, PayloadTooLarge) as error:
            error.message = f"memories[{index}]: {error.message}"
            raise
    with transaction.atomic(durable=True):
        memories = Memory.objects.bulk_create(
            [_new_memory(project=project, draft=d, actor=actor, status=Status.ACTIVE) for d in drafts]
        )
        MemoryRevision.objects.bulk_create(
            [MemoryRevision(memory=m, action="create", before={}, after=snapshot(m), actor=actor) for m in memories]
        )
        for user_id, scope in sorted({(m.user_id, m.scope) for m in memories}):
            _user_changed(project.pk, user_id, scope)
    _notify_content_change(memories, inline=False)
    return memories


def memory_edit(*, memory: Memory, changes: dict[str, Any], actor: str, reason: str = "") -> Memory:
    """Apply field changes, writing a revision. Content changes re-embed the memory."""
    unknown = set(changes) - EDITABLE_FIELDS
    if unknown:
        raise Invalid(f"cannot edit {', '.join(sorted(unknown))}", code="not_editable")
    with transaction.atomic(durable=True):
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        before = snapshot(memory)
        draft = _draft_from(memory, changes)
        validate_draft(project=memory.project, draft=draft)
        content_changed = draft.content != memory.content
        for name in changes:
            setattr(memory, name, getattr(draft, name))
        if content_changed:
            memory.content_hash = content_hash(memory.content)
            memory.embedding_status = EmbeddingStatus.PENDING
        if snapshot(memory) == before:
            return memory
        memory.save()
        _revision(memory, action="edit", before=before, actor=actor, reason=reason)
    if content_changed:
        _notify_content_change([memory], inline=True)
    return memory


def _draft_from(memory: Memory, changes: dict[str, Any]) -> MemoryDraft:
    values = {name: getattr(memory, name) for name in ("user_id", "content", "kind", "category", "scope", "importance")}
    values |= {"metadata": memory.metadata, "expires_at": memory.expires_at}
    values |= {k: v for k, v in changes.items() if k in EDITABLE_FIELDS}
    return MemoryDraft(**values)


def memory_supersede(*, memory: Memory, draft: MemoryDraft, actor: str, reason: str = "") -> Memory:
    """Write a successor (version + 1) and mark ``memory`` superseded.

    Raises Conflict when ``memory`` already has a successor. A successor keeps its
    predecessor's scope, so a chain never spans what different users can see.
    """
    validate_draft(project=memory.project, draft=draft)
    if draft.scope != memory.scope:
        raise Invalid("a successor keeps the scope of the memory it supersedes", code="scope_change")
    try:
        with transaction.atomic(durable=True):
            old = Memory.objects.select_for_update().get(pk=memory.pk)
            if old.status == Status.SUPERSEDED or Memory.objects.filter(supersedes=old).exists():
                raise Conflict("this memory has already been superseded", code="already_superseded")
            new = _new_memory(
                project=old.project,
                draft=draft,
                actor=actor,
                status=Status.ACTIVE,
                version=old.version + 1,
                supersedes=old,
            )
            new.save()
            _retire(old, successor=new, actor=actor, reason=reason)
            _revision(new, action="create", before={}, actor=actor, reason=reason)
            _link_related(new, draft.related, actor=actor)
    except IntegrityError as error:  # a concurrent supersede won the race
        raise Conflict("this memory has already been superseded", code="already_superseded") from error
    _notify_content_change([new], inline=True)
    return new


def _retire(
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
    _revision(old, action="superseded", before=before, actor=actor, reason=reason)
    _create_edge(successor, old, relationship=Relationship.SUPERSEDES, actor=actor)
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
    deleted, archived) goes through ``_retire`` or ``_set_status``, which call this inside their
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
        reason = f"{RESTS_ON_CHANGED}: {_edge_target(dependent, source)} was {what}"
        _revision(dependent, action=RETURN_TO_REVIEW, before=before, actor=actor, reason=reason)
    return dependents


def _restore_dependents(source: Memory, *, actor: str, reason: str) -> None:
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
        _revision(dependent, action="restore", before=before, actor=actor, reason=reason)


FORGETTING: dict[str, str] = {Status.DELETED.value: "deleted", Status.ARCHIVED.value: "archived"}


def _set_status(memory: Memory, *, status: str, action: str, actor: str, reason: str = "") -> Memory:
    with transaction.atomic(durable=True):
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        before = snapshot(memory)
        memory.status = status
        memory.deleted_at = timezone.now() if status == Status.DELETED else None
        memory.save(update_fields=["status", "deleted_at", "updated_at"])
        _revision(memory, action=action, before=before, actor=actor, reason=reason)
        if status in FORGETTING and before["status"] != status:
            _return_dependents_to_review(memory, actor=actor, what=FORGETTING[status])
    return memory


def memory_archive(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Take a memory out of retrieval without deleting it."""
    return _set_status(memory, status=Status.ARCHIVED, action="archive", actor=actor, reason=reason)


def memory_delete(*, memory: Memory, actor: str, reason: str = "") -> Memory:
    """Soft delete: the row and its history stay; nothing reads it any more."""
    return _set_status(memory, status=Status.DELETED, action="delete", actor=actor, reason=reason)


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
        return _set_status(memory, status=Status.ACTIVE, action="approve", actor=actor, reason=reason)
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
                _retire(old, successor=new, actor=actor, reason=reason)
            _revision(new, action="approve", before=before, actor=actor, reason=reason)
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
    return _set_status(memory, status=previous, action="restore", actor=actor, reason=reason)


# --- Review: supersede-instead, merge, and undoing a review decision -----------------------


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
            _retire(old, successor=new, actor=actor, reason=reason)
            _revision(new, action="approve", before=before, actor=actor, reason=reason)
    except IntegrityError as error:  # a concurrent supersede of the same memory won the race
        raise Conflict("that memory has already been superseded", code="already_superseded") from error
    return new


def memory_merge_proposal(*, memory: Memory, target: Memory, content: str, actor: str) -> Memory:
    """Merge a proposal into an existing memory: ``target`` is edited to ``content`` (the
    combined text) and the proposal is rejected, both in one transaction, each with a
    revision naming the other. Returns the edited ``target``."""
    with transaction.atomic(durable=True):
        proposal, old = _pending_and_target(memory.pk, target.pk)
        draft = validate_draft(project=old.project, draft=_draft_from(old, {"content": content}))
        before = snapshot(old)
        old.content, old.content_hash = draft.content, content_hash(draft.content)
        old.embedding_status = EmbeddingStatus.PENDING
        old.save()
        _revision(old, action="edit", before=before, actor=actor, reason=f"merged with proposal {proposal.pk}")
        before = snapshot(proposal)
        proposal.status, proposal.deleted_at = Status.DELETED, timezone.now()
        proposal.save(update_fields=["status", "deleted_at", "updated_at"])
        _revision(proposal, action="delete", before=before, actor=actor, reason=f"merged into {old.pk}")
    _notify_content_change([old], inline=True)
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
        _revision(new, action="unapprove", before=before, actor=actor, reason=reason)
        if old is not None and old.status == Status.SUPERSEDED:
            MemoryEdge.objects.filter(from_memory=new, to_memory=old, relationship=Relationship.SUPERSEDES).delete()
            before = snapshot(old)
            old.status = Status.ACTIVE
            old.save(update_fields=["status", "updated_at"])
            _revision(old, action="restore", before=before, actor=actor, reason=reason)
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
        _revision(old, action="edit", before=before, actor=actor, reason=reason)
        before = snapshot(proposal)
        proposal.status, proposal.deleted_at = Status.PENDING_REVIEW, None
        proposal.save(update_fields=["status", "deleted_at", "updated_at"])
        _revision(proposal, action="restore", before=before, actor=actor, reason=reason)
    _notify_content_change([old], inline=True)
    return old


# --- Consolidation: merging and superseding memories that already exist ----------------------
# (consolidation/services.py decides; these write. docs/adr/0093-consolidation.md)

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
        _retire(gone, successor=keep, actor=actor, reason=why, metadata=metadata, what="merged")
        _revision(keep, action="merge", before=snapshot(keep), actor=actor, reason=f"merged {gone.pk} into this memory")
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
            _revision(head, action="supersede", before=before, actor=actor, reason=reason)
            _retire(gone, successor=head, actor=actor, reason=reason)
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
        _revision(keep, action="unconsolidate", before=before, actor=actor, reason=reason)
        before = snapshot(gone)
        gone.status = Status.ACTIVE
        gone.metadata = {k: v for k, v in (gone.metadata or {}).items() if k != MERGED_INTO}
        gone.save(update_fields=["status", "metadata", "updated_at"])
        _revision(gone, action="restore", before=before, actor=actor, reason=reason)
        _restore_dependents(gone, actor=actor, reason=reason)
    return gone


def _link_related(memory: Memory, related: Iterable[tuple[str, str]], *, actor: str) -> None:
    for target_id, relationship in related:
        target = memory_get_visible(project=memory.project, user_id=memory.user_id, memory_id=target_id)
        _create_edge(memory, target, relationship=relationship, actor=actor)


def _create_edge(source: Memory, target: Memory, *, relationship: str, actor: str) -> MemoryEdge:
    if source.pk == target.pk:
        raise Invalid("a memory cannot be linked to itself", code="self_link")
    if relationship not in Relationship.values:
        raise Invalid(f"unknown relationship {relationship!r}", code="unknown_relationship")
    if source.scope == Scope.USER and target.scope == Scope.USER and source.user_id != target.user_id:
        raise NotFound("memory not found")
    edge, _ = MemoryEdge.objects.get_or_create(
        from_memory=source,
        to_memory=target,
        relationship=relationship,
        defaults={"project_id": source.project_id, "created_by": actor},
    )
    return edge


def edge_link(*, source: Memory, target: Memory, relationship: str, actor: str) -> MemoryEdge:
    """Link two memories the caller can see (same project; same user for user-scope ones)."""
    if source.project_id != target.project_id:
        raise NotFound("memory not found")
    with transaction.atomic(durable=True):
        edge = _create_edge(source, target, relationship=relationship, actor=actor)
        before = snapshot(source)
        _revision(
            source,
            action="link",
            before=before,
            actor=actor,
            reason=f"{relationship} -> {_edge_target(source, target)}",
        )
    return edge


def _edge_target(source: Memory, target: Memory) -> str:
    """How a link's target is named in the source's history, which everyone who sees the source
    can read: a shared memory's link to one user's memory must not give away that memory's id."""
    return str(target.pk) if target.scope == Scope.PROJECT or source.scope == Scope.USER else "a user-scope memory"


def edge_unlink(*, source: Memory, target: Memory, relationship: str | None, actor: str) -> int:
    """Remove links from ``source`` to ``target`` (one relationship, or all). Returns how many."""
    with transaction.atomic(durable=True):
        edges = MemoryEdge.objects.filter(from_memory=source, to_memory=target)
        if relationship:
            edges = edges.filter(relationship=relationship)
        count, _ = edges.delete()
        if count:
            _revision(
                source,
                action="unlink",
                before=snapshot(source),
                actor=actor,
                reason=f"-> {_edge_target(source, target)}",
            )
    return count

"""Creating and editing memories: the draft a caller wants stored and its checks, creation (one,
once, in bulk), edits and supersedes. The API, the UI, Celery tasks and management commands all
call these; none of them re-implements a rule.

Each public service is the outermost transaction (``durable=True``) and queues background work on
commit, so a worker never reads uncommitted rows. Every change writes a :class:`MemoryRevision`
naming its actor (``api_key:<prefix>``, ``user:<username>``, ``system:<what>`` or
``classifier:<job>``) through ``memories.history``. The other writes of the domain sit beside this
module, one job each: status changes and what rests on a memory (``lifecycle``), review decisions
(``review``), consolidation's merges (``consolidating``), links (``edges``); teams, projects and
keys are ``tenancy``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from common.errors import Conflict, Invalid, PayloadTooLarge
from common.redaction import is_mostly_secret, redact, redact_json
from memories.edges import link_related
from memories.history import notify_content_change, record_revision, snapshot, user_changed
from memories.lifecycle import retire
from memories.models import EmbeddingStatus, Kind, Memory, MemoryRevision, Project, Scope, Status
from memories.selectors import memory_active_duplicate

# Fields an edit may change.
EDITABLE_FIELDS = frozenset({"content", "kind", "category", "importance", "metadata", "expires_at"})


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


def memory_create(
    *, project: Project, draft: MemoryDraft, actor: str, status: str = Status.ACTIVE, embed_inline: bool = True
) -> Memory:
    """Store one memory (and its ``related`` links) and record its first revision."""
    validate_draft(project=project, draft=draft)
    with transaction.atomic(durable=True):
        memory = _new_memory(project=project, draft=draft, actor=actor, status=status)
        memory.save()
        record_revision(memory, action="create", before={}, actor=actor)
        link_related(memory, draft.related, actor=actor)
    notify_content_change([memory], inline=embed_inline)
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
            user_changed(project.pk, user_id, scope)
    notify_content_change(memories, inline=False)
    return memories


def memory_edit(*, memory: Memory, changes: dict[str, Any], actor: str, reason: str = "") -> Memory:
    """Apply field changes, writing a revision. Content changes re-embed the memory."""
    unknown = set(changes) - EDITABLE_FIELDS
    if unknown:
        raise Invalid(f"cannot edit {', '.join(sorted(unknown))}", code="not_editable")
    with transaction.atomic(durable=True):
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        before = snapshot(memory)
        draft = draft_from(memory, changes)
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
        record_revision(memory, action="edit", before=before, actor=actor, reason=reason)
    if content_changed:
        notify_content_change([memory], inline=True)
    return memory


def draft_from(memory: Memory, changes: dict[str, Any]) -> MemoryDraft:
    """``memory`` as a draft with ``changes`` applied, so an edit is validated like a new memory."""
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
            retire(old, successor=new, actor=actor, reason=reason)
            record_revision(new, action="create", before={}, actor=actor, reason=reason)
            link_related(new, draft.related, actor=actor)
    except IntegrityError as error:  # a concurrent supersede won the race
        raise Conflict("this memory has already been superseded", code="already_superseded") from error
    notify_content_change([new], inline=True)
    return new

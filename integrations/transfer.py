"""Lossless export and import of a project's memory as JSON lines (docs/adr/0046).

The file is one JSON object a line, each with a ``type``:

- ``header``: ``{"type": "header", "format": "memoryhub-export", "version": 1, "user": <filter or null>,
  "conversations": <bool>}``, always first;
- ``memory``: every version of every memory (superseded, archived and deleted ones too) with its
  scope, kind, category, status, version, ``supersedes`` (the predecessor's id), metadata, source,
  actor and every timestamp, and its ``revisions`` (the edit history, oldest first);
- ``link``: an edge between two memories of the file;
- ``conversation`` (with ``--conversations``): a conversation with its ``messages``.

Ids: a row keeps the id it had in the export it was imported from (``ImportedRecord``), so
export -> import into an empty project -> export gives the same file. Rows made here carry
their own id. Vectors are not in the file: an import queues every memory for embedding with
the project's active model, as a bulk create does.

Import validates every line first and reports every rejected line with its reason; nothing is
written unless all lines pass, and then everything is written in one transaction. A memory or
conversation whose id the project already holds is skipped, so a re-run adds nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from conversations.models import Conversation, Message
from integrations import import_checks as checks
from integrations.models import ImportedRecord
from memories import history
from memories.models import (
    Memory,
    MemoryEdge,
    MemoryRevision,
    Project,
)

FORMAT = "memoryhub-export"
VERSION = 1


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _source_ids(project: Project, kind: str) -> dict[str, str]:
    """Target id -> the id it had in the export it came from, for the rows an import made."""
    rows = ImportedRecord.objects.filter(project=project, kind=kind).values_list("target_id", "source_id")
    return {str(target): source for target, source in rows}


def export_lines(*, project: Project, user_id: str | None = None, conversations: bool = False) -> Iterator[str]:
    """The project's (or one user's) memory as JSON lines, in a stable order."""
    yield json.dumps(
        {"type": "header", "format": FORMAT, "version": VERSION, "user": user_id, "conversations": conversations}
    )
    memories = Memory.objects.filter(project=project)
    if user_id is not None:
        memories = memories.filter(user_id=user_id)
    ids = _source_ids(project, "memory")

    def export_id(pk: Any) -> str:
        return ids.get(str(pk), str(pk))

    revisions: dict[Any, list[dict[str, Any]]] = {}
    for revision in MemoryRevision.objects.filter(memory__in=memories).order_by("created_at", "id"):
        revisions.setdefault(revision.memory_id, []).append(
            {
                "action": revision.action,
                "before": revision.before,
                "after": revision.after,
                "actor": revision.actor,
                "reason": revision.reason,
                "created_at": _time(revision.created_at),
            }
        )
    rows = sorted(memories.iterator(chunk_size=2000), key=lambda m: (m.created_at, export_id(m.pk)))
    exported = set()
    for memory in rows:
        exported.add(memory.pk)
        line: dict[str, Any] = {
            "type": "memory",
            "id": export_id(memory.pk),
            "user_id": memory.user_id,
            "scope": memory.scope,
            "kind": memory.kind,
            "category": memory.category,
            "content": memory.content,
            "importance": memory.importance,
            "metadata": memory.metadata,
            "status": memory.status,
            "version": memory.version,
            "supersedes": export_id(memory.supersedes_id) if memory.supersedes_id else None,
            "source": memory.source,
            "created_by": memory.created_by,
            **{name: _time(getattr(memory, name)) for name in checks.MEMORY_TIMES},
            "revisions": revisions.get(memory.pk, []),
        }
        yield json.dumps(line, ensure_ascii=False)
    edges = MemoryEdge.objects.filter(project=project, from_memory__in=memories, to_memory__in=memories)
    links = [
        {
            "type": "link",
            "from": export_id(edge.from_memory_id),
            "to": export_id(edge.to_memory_id),
            "relationship": edge.relationship,
            "created_by": edge.created_by,
            "created_at": _time(edge.created_at),
        }
        for edge in edges
    ]
    for link in sorted(links, key=lambda item: (item["created_at"], item["from"], item["to"], item["relationship"])):
        yield json.dumps(link, ensure_ascii=False)
    if conversations:
        yield from _export_conversations(project, user_id)


def _export_conversations(project: Project, user_id: str | None) -> Iterator[str]:
    ids = _source_ids(project, "conversation")
    chats = Conversation.objects.filter(project=project)
    if user_id is not None:
        chats = chats.filter(user_id=user_id)
    messages: dict[Any, list[dict[str, Any]]] = {}
    for message in Message.objects.filter(conversation__in=chats).order_by("conversation", "seq"):
        messages.setdefault(message.conversation_id, []).append(
            {
                "seq": message.seq,
                "role": message.role,
                "content": message.content,
                "extra": message.extra,
                "correlation_id": message.correlation_id,
                "context": message.context,
                "said_at": _time(message.said_at) if message.said_at else None,
                "created_at": _time(message.created_at),
            }
        )
    rows = sorted(chats, key=lambda c: (c.created_at, ids.get(str(c.pk), str(c.pk))))
    for chat in rows:
        line = {
            "type": "conversation",
            "id": ids.get(str(chat.pk), str(chat.pk)),
            "user_id": chat.user_id,
            "session_id": chat.session_id,
            "title": chat.title,
            "metadata": chat.metadata,
            "created_at": _time(chat.created_at),
            "updated_at": _time(chat.updated_at),
            "messages": messages.get(chat.pk, []),
        }
        yield json.dumps(line, ensure_ascii=False)


# --- import -----------------------------------------------------------------------------------


@dataclass
class Rejected:
    line: int
    reason: str


@dataclass
class ImportResult:
    memories: int = 0
    revisions: int = 0
    links: int = 0
    conversations: int = 0
    messages: int = 0
    skipped: int = 0
    rejected: list[Rejected] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "imported": {
                "memories": self.memories,
                "revisions": self.revisions,
                "links": self.links,
                "conversations": self.conversations,
                "messages": self.messages,
            },
            "skipped": self.skipped,
            "rejected": [{"line": r.line, "reason": r.reason} for r in self.rejected],
        }


@dataclass
class _Plan:
    memories: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    conversations: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def _existing(project: Project, kind: str, model: Any, source_ids: list[str]) -> dict[str, Any]:
    """Source id -> the project's row for every source id the project already holds."""
    found: dict[str, Any] = {}
    for start in range(0, len(source_ids), 10_000):
        chunk = source_ids[start : start + 10_000]
        records = ImportedRecord.objects.filter(project=project, kind=kind, source_id__in=chunk)
        found.update(records.values_list("source_id", "target_id"))
        own = []
        for source in chunk:
            try:
                own.append(uuid.UUID(source))
            except ValueError:
                continue
        for pk in model.objects.filter(project=project, pk__in=own).values_list("pk", flat=True):
            found.setdefault(str(pk), pk)
    return found


def import_lines(*, project: Project, lines: Iterable[str], actor: str = "system:import") -> ImportResult:
    """Validate every line, then write all of them in one transaction, or nothing when any is rejected."""
    result = ImportResult()
    plan = _Plan()
    seen_memories: set[str] = set()
    header_seen = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            try:
                item = json.loads(raw)
            except ValueError as error:
                raise checks.Bad(f"not JSON: {error}") from error
            if not isinstance(item, dict):
                raise checks.Bad("a line must be a JSON object")
            kind = item.get("type")
            if kind == "header":
                header_seen = True
                if item.get("format") != FORMAT or item.get("version") != VERSION:
                    raise checks.Bad(f"not a {FORMAT} version {VERSION} file")
            elif kind == "memory":
                checked = checks.check_memory(project, item)
                if checked["source_id"] in seen_memories:
                    raise checks.Bad(f"memory {checked['source_id']} appears twice")
                seen_memories.add(checked["source_id"])
                plan.memories.append((number, checked))
            elif kind == "link":
                plan.links.append((number, checks.check_link(item)))
            elif kind == "conversation":
                plan.conversations.append((number, checks.check_conversation(item)))
            else:
                raise checks.Bad(f"unknown type {kind!r}")
        except checks.Bad as error:
            result.rejected.append(Rejected(number, str(error)))
    if not header_seen and not result.rejected:
        result.rejected.append(Rejected(1, f"no header line: not a {FORMAT} file"))
    existing = _existing(project, "memory", Memory, [m["source_id"] for _, m in plan.memories])
    known = seen_memories | set(existing)
    for number, memory in plan.memories:
        if memory["supersedes"] is not None and memory["supersedes"] not in known:
            result.rejected.append(Rejected(number, f"supersedes {memory['supersedes']}, which is not in the file"))
    for number, link in plan.links:
        missing = [end for end in (link["from"], link["to"]) if end not in known]
        if missing:
            result.rejected.append(Rejected(number, f"links to {', '.join(missing)}, not in the file"))
    if result.rejected:
        result.rejected.sort(key=lambda r: r.line)
        return result
    with transaction.atomic():
        new_memories = _write_memories(project, plan, existing, result)
        _write_links(project, plan, existing, result)
        _write_conversations(project, plan, result)
    history.notify_content_change(new_memories, inline=False)
    return result


def _write_memories(project: Project, plan: _Plan, existing: dict[str, Any], result: ImportResult) -> list[Memory]:
    fresh = [memory for _, memory in plan.memories if memory["source_id"] not in existing]
    result.skipped += len(plan.memories) - len(fresh)
    targets = {m["source_id"]: uuid.uuid4() for m in fresh}
    existing.update(targets)
    rows = [Memory(id=targets[m["source_id"]], project=project, **m["fields"]) for m in fresh]
    Memory.objects.bulk_create(rows, batch_size=2000)
    ImportedRecord.objects.bulk_create(
        [ImportedRecord(project=project, kind="memory", source_id=s, target_id=t) for s, t in targets.items()],
        batch_size=2000,
    )
    chained = [(targets[m["source_id"]], existing[m["supersedes"]]) for m in fresh if m["supersedes"]]
    with connection.cursor() as cursor:
        # bulk_create stamps created_at/updated_at with now(); the file's times win.
        for start in range(0, len(fresh), 5000):
            batch = fresh[start : start + 5000]
            cursor.execute(
                "UPDATE memories_memory m SET created_at = v.c, updated_at = v.u "
                "FROM unnest(%s::uuid[], %s::timestamptz[], %s::timestamptz[]) AS v(id, c, u) WHERE m.id = v.id",
                [
                    [targets[m["source_id"]] for m in batch],
                    [m["fields"]["created_at"] for m in batch],
                    [m["fields"]["updated_at"] for m in batch],
                ],
            )
        for start in range(0, len(chained), 5000):
            pairs = chained[start : start + 5000]
            cursor.execute(
                "UPDATE memories_memory m SET supersedes_id = v.p "
                "FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, p) WHERE m.id = v.id",
                [[pair[0] for pair in pairs], [pair[1] for pair in pairs]],
            )
    revisions = [
        MemoryRevision(memory_id=targets[m["source_id"]], **{k: v for k, v in revision.items() if k != "created_at"})
        for m in fresh
        for revision in m["revisions"]
    ]
    created = MemoryRevision.objects.bulk_create(revisions, batch_size=2000)
    times = [revision["created_at"] for m in fresh for revision in m["revisions"]]
    with connection.cursor() as cursor:
        for start in range(0, len(created), 5000):
            cursor.execute(
                "UPDATE memories_memoryrevision r SET created_at = v.c "
                "FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, c) WHERE r.id = v.id",
                [[r.pk for r in created[start : start + 5000]], times[start : start + 5000]],
            )
    result.memories += len(rows)
    result.revisions += len(created)
    return rows


def _write_links(project: Project, plan: _Plan, ids: dict[str, Any], result: ImportResult) -> None:
    present = set(
        MemoryEdge.objects.filter(project=project).values_list("from_memory_id", "to_memory_id", "relationship")
    )
    fresh = []
    for _, link in plan.links:
        key = (uuid.UUID(str(ids[link["from"]])), uuid.UUID(str(ids[link["to"]])), link["relationship"])
        if key in present:
            result.skipped += 1
            continue
        present.add(key)
        fresh.append((key, link))
    created = MemoryEdge.objects.bulk_create(
        [
            MemoryEdge(
                project=project,
                from_memory_id=key[0],
                to_memory_id=key[1],
                relationship=key[2],
                created_by=link["created_by"],
            )
            for key, link in fresh
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        for start in range(0, len(created), 5000):
            cursor.execute(
                "UPDATE memories_memoryedge e SET created_at = v.c "
                "FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, c) WHERE e.id = v.id",
                [
                    [e.pk for e in created[start : start + 5000]],
                    [link["created_at"] for _, link in fresh][start : start + 5000],
                ],
            )
    result.links += len(created)


def _write_conversations(project: Project, plan: _Plan, result: ImportResult) -> None:
    chats = [chat for _, chat in plan.conversations]
    existing = _existing(project, "conversation", Conversation, [c["source_id"] for c in chats])
    for chat in chats:
        if chat["source_id"] in existing:
            result.skipped += 1
            continue
        row = Conversation.objects.create(
            project=project,
            user_id=chat["user_id"],
            session_id=chat["session_id"],
            title=chat["title"],
            metadata=chat["metadata"],
        )
        ImportedRecord.objects.create(
            project=project, kind="conversation", source_id=chat["source_id"], target_id=row.pk
        )
        messages = Message.objects.bulk_create(
            [Message(conversation=row, **{k: v for k, v in m.items() if k != "created_at"}) for m in chat["messages"]]
        )
        Conversation.objects.filter(pk=row.pk).update(created_at=chat["created_at"], updated_at=chat["updated_at"])
        for message, source in zip(messages, chat["messages"], strict=True):
            Message.objects.filter(pk=message.pk).update(created_at=source["created_at"])
        result.conversations += 1
        result.messages += len(messages)

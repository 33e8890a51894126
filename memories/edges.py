"""Links between memories (``MemoryEdge``): linking and unlinking with a revision on the source,
the links a new memory asks for (``MemoryDraft.related``), and how a link's target is named in
history without giving away a memory the reader cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from common.errors import Invalid, NotFound
from memories.history import record_revision, snapshot
from memories.models import Memory, MemoryEdge, Relationship, Scope
from memories.selectors import memory_get_visible


def link_related(memory: Memory, related: Iterable[tuple[str, str]], *, actor: str) -> None:
    """Link a new memory to the memories its draft names (``MemoryDraft.related``), each one visible to its owner."""
    for target_id, relationship in related:
        target = memory_get_visible(project=memory.project, user_id=memory.user_id, memory_id=target_id)
        create_edge(memory, target, relationship=relationship, actor=actor)


def create_edge(source: Memory, target: Memory, *, relationship: str, actor: str) -> MemoryEdge:
    """The link itself, inside the caller's transaction, without a revision (the caller records its own)."""
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
        edge = create_edge(source, target, relationship=relationship, actor=actor)
        before = snapshot(source)
        record_revision(
            source,
            action="link",
            before=before,
            actor=actor,
            reason=f"{relationship} -> {edge_target(source, target)}",
        )
    return edge


def edge_target(source: Memory, target: Memory) -> str:
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
            record_revision(
                source,
                action="unlink",
                before=snapshot(source),
                actor=actor,
                reason=f"-> {edge_target(source, target)}",
            )
    return count

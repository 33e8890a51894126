"""Which memories a retrieve may return, and graph hops: each found memory's active neighbours
along its edges, placed right after it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q
from django.utils import timezone

from memories.models import Memory, MemoryEdge, Project, Status
from memories.selectors import memories_by_id

if TYPE_CHECKING:
    from retrieval.shapes import RetrieveRequest, Trace

GRAPH_DECAY = 0.85  # a neighbour scores below the memory that led to it


def searchable(memory: Memory, request: RetrieveRequest, *, now: datetime, statuses: Sequence[str]) -> bool:
    """Whether the search could return ``memory`` now: the hybrid statement's rule in Python
    (``statuses``, not expired, the request's kinds and categories)."""
    return (
        memory.status in statuses
        and (memory.expires_at is None or memory.expires_at > now)
        and (not request.kinds or memory.kind in request.kinds)
        and (not request.categories or memory.category in request.categories)
    )


def load_memories(project: Project, user_id: str, ids: Sequence[str]) -> dict[str, Memory]:
    """The visible memories among ``ids``, with what the API shows of them (one statement)."""
    return memories_by_id(project=project, user_id=user_id, ids=ids)


def expand_graph(
    project: Project, request: RetrieveRequest, ranked: list[tuple[Memory, float]], *, trace: Trace
) -> list[tuple[Memory, float]]:
    """Add active neighbours along edges, ``hop_depth`` hops, each right after its parent.

    A neighbour's score lies between its parent's and the next memory's, so the list stays
    in descending score order while the neighbour sits where it belongs: next to the memory
    it hangs from, not after the tenth result.
    """
    started = time.perf_counter()
    seen = {str(m.pk) for m, _ in ranked}
    frontier = list(ranked)
    result = list(ranked)
    for _hop in range(max(0, request.hop_depth)):
        # Rows from load_memories know whether they have links at all: most have none, and
        # then there is no edge to look up.
        frontier = [(m, s) for m, s in frontier if getattr(m, "linked", True)]
        neighbours = _neighbours(project, request, frontier, seen)
        children: dict[str, list[Memory]] = {}
        for parent_id, relationship, memory, _value in neighbours:
            trace.graph_paths[str(memory.pk)] = (parent_id, relationship)
            seen.add(str(memory.pk))
            children.setdefault(parent_id, []).append(memory)
        result, frontier = insert_after_parents(result, children)
        if not frontier:
            break
    trace.timed("graph", started)
    return result


def insert_after_parents(
    ranked: list[tuple[Memory, float]], children: dict[str, list[Memory]]
) -> tuple[list[tuple[Memory, float]], list[tuple[Memory, float]]]:
    """``ranked`` with each parent's children right after it; also the children alone."""
    result: list[tuple[Memory, float]] = []
    added: list[tuple[Memory, float]] = []
    for index, (memory, value) in enumerate(ranked):
        result.append((memory, value))
        kids = children.get(str(memory.pk), [])
        following = ranked[index + 1][1] if index + 1 < len(ranked) else value * GRAPH_DECAY**2
        for position, kid in enumerate(kids, 1):
            # Strictly between the parent and what follows it, in the order the edges ranked them.
            share = GRAPH_DECAY**position
            kid_value = following + (value - following) * share * 0.5 if following < value else value
            result.append((kid, kid_value))
            added.append((kid, kid_value))
    return result, added


def _neighbours(
    project: Project, request: RetrieveRequest, frontier: list[tuple[Memory, float]], seen: set[str]
) -> list[tuple[str, str, Memory, float]]:
    if not frontier:
        return []
    parent_score = {str(m.pk): s for m, s in frontier}
    ids = list(parent_score)
    edges = (
        MemoryEdge.objects.filter(project=project)
        .exclude(relationship="supersedes")
        .filter(Q(from_memory_id__in=ids) | Q(to_memory_id__in=ids))
        .values_list("from_memory_id", "to_memory_id", "relationship")
    )
    pairs = []  # (parent, neighbour, relationship), both directions
    for a, b, relationship in edges:
        source, target = str(a), str(b)
        if source in parent_score:
            pairs.append((source, target, relationship))
        if target in parent_score:
            pairs.append((target, source, relationship))
    wanted = {target for _, target, _ in pairs if target not in seen}
    # What the search itself may return (active, unexpired, the request's kinds and categories).
    now = timezone.now()
    loaded = {
        memory_id: memory
        for memory_id, memory in load_memories(project, request.user_id, sorted(wanted)).items()
        if searchable(memory, request, now=now, statuses=(Status.ACTIVE,))
    }
    found: dict[str, tuple[str, str, Memory, float]] = {}
    for parent, target, relationship in pairs:
        memory = loaded.get(target)
        if memory is None:
            continue
        value = parent_score[parent] * GRAPH_DECAY
        if target not in found or found[target][3] < value:
            found[target] = (parent, relationship, memory, value)
    return sorted(found.values(), key=lambda item: -item[3])

"""Near-duplicates by meaning: the live memory a user sees whose vector is closest to a text's.

Capture asks before writing a memory (``capture.services``); the search is an exact cosine
scan of one user's live rows under the project's active model.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from memories.fields import vector_literal
from memories.models import Embedding, Memory, Project, Status
from memories.selectors import LIVE_STATUSES, visible_q
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.protocol import EmbedderError
from retrieval.embedding.vector_cache import embed_texts
from retrieval.vectors.memory_vectors import active_model

NEAR_DUPLICATE_SIMILARITY = 0.95


@dataclass(frozen=True)
class NearDuplicate:
    memory_id: str
    similarity: float


def has_vectors(*, project: Project, user_id: str, model: str) -> bool:
    """Whether any live memory the user sees has a vector of ``model`` (else skip embedding)."""
    return _vectors(project=project, user_id=user_id, model=model).exists()


def nearest_memory(*, project: Project, user_id: str, model: str, vector: Any) -> NearDuplicate | None:
    """The live visible memory closest to ``vector`` by cosine (``NEAREST_SQL``); when none of the
    rows the copies picked is live (all superseded, say), by an exact scan of the user's live rows."""
    rows = _nearest(project=project, model=model, owners=[user_id], vectors=[vector], statuses=LIVE_STATUSES, limit=1)
    if rows:
        return NearDuplicate(memory_id=rows[0][1], similarity=float(rows[0][2]))
    return _nearest_by_scan(project=project, user_id=user_id, model=model, vector=vector)


def _nearest_by_scan(*, project: Project, user_id: str, model: str, vector: Any) -> NearDuplicate | None:
    row = (
        _vectors(project=project, user_id=user_id, model=model)
        .filter(dimension=len(vector))
        .annotate(distance=CosineDistance("vector", vector))
        .order_by("distance")
        .values_list("memory_id", "distance")
        .first()
    )
    if row is None:
        return None
    return NearDuplicate(memory_id=str(row[0]), similarity=1.0 - float(row[1]))


def _vectors(*, project: Project, user_id: str, model: str) -> QuerySet[Embedding]:
    return Embedding.objects.filter(project=project, model=model, memory__status__in=LIVE_STATUSES).filter(
        visible_q(user_id=user_id)
    )


class NearDuplicateFinder:
    """Finds a live visible memory whose vector is within ``NEAR_DUPLICATE_SIMILARITY`` of a text's.

    Compares against the project's active model only; skips the embedding call altogether
    while the user has no vectors. When the embedder fails the check is skipped (the exact
    duplicate check still ran) and ``skipped`` says why.
    """

    def __init__(self, *, project: Project, user_id: str, threshold: float = NEAR_DUPLICATE_SIMILARITY) -> None:
        self.project, self.user_id, self.threshold = project, user_id, threshold
        self.model = active_model(project)
        self.skipped = ""
        self._enabled: bool | None = None

    def find(self, content: str) -> NearDuplicate | None:
        if self._enabled is None:
            self._enabled = has_vectors(project=self.project, user_id=self.user_id, model=self.model)
        if not self._enabled:
            return None
        try:
            vector = embed_texts([content], embedder=embedder_for_model(self.model))[0]
        except EmbedderError as error:
            self._enabled, self.skipped = False, f"near-duplicate check skipped: {error}"
            return None
        hit = nearest_memory(project=self.project, user_id=self.user_id, model=self.model, vector=vector)
        return hit if hit is not None and hit.similarity >= self.threshold else None


# Shown as a collision from this cosine up (the near-duplicate check above refuses a write from
# 0.95). Chosen by eye on a handful of pairs with the local model, not measured on a set.
SIMILAR_MIN_COSINE = 0.5

# Rows the half-precision copies pick per query vector in each of the two groups a user sees
# (their own, the project's shared), before the full vectors order them and the wanted statuses are
# kept: the search's exact read (retrieval/ranking/search.py, HALF_SPARE). A user's 10,000 vectors: the
# near-duplicate check 41-45 ms p50 by a scan of the full vectors through the table, 6.6 ms so
# (docs/adr/0025-half-precision-copies.md).
NEAREST_PICK = 20

# One statement for the near-duplicate check and for a whole review page: per (owner, vector), the
# memories that owner sees (the visibility rule of the search) with one of ``statuses`` (and not
# expired, with ``unexpired``), nearest first, from the cosine ``floor`` up. "+ 0" keeps every
# ordering off the HNSW index: ordered by it, the review page's statement walked the whole project's
# graph without the search's iterative scan, then filtered to one user's rows, and 8 of 40 cards at
# 100k memories missed memories an exact scan finds.
NEAREST_SQL = """
WITH proposals AS MATERIALIZED (
    SELECT ord, owner, v::vector({dim}) AS v, l2_normalize(v::vector({dim}))::halfvec({dim}) AS h
    FROM unnest(%(owners)s::text[], %(vectors)s::text[]) WITH ORDINALITY AS t(owner, v, ord)
)
SELECT p.ord, c.id::text, 1 - c.d
FROM proposals p
CROSS JOIN LATERAL (
    SELECT e.memory_id AS id, e.vector::vector({dim}) <=> p.v AS d
    FROM (
        (SELECT e.memory_id FROM memories_embedding e
         WHERE e.model = %(model)s AND e.project_id = %(project)s AND e.user_id = p.owner
         ORDER BY (e.vector_half::halfvec({dim}) <=> p.h) + 0 LIMIT %(pick)s)
        UNION ALL
        (SELECT e.memory_id FROM memories_embedding e
         WHERE e.model = %(model)s AND e.project_id = %(project)s AND e.scope = 'project' AND e.user_id <> p.owner
         ORDER BY (e.vector_half::halfvec({dim}) <=> p.h) + 0 LIMIT %(pick)s)
    ) picked
    JOIN memories_embedding e ON e.memory_id = picked.memory_id AND e.model = %(model)s
    JOIN memories_memory m ON m.id = e.memory_id
    WHERE m.status = ANY(%(statuses)s)
      AND (NOT %(unexpired)s OR m.expires_at IS NULL OR m.expires_at > now())
    ORDER BY (e.vector::vector({dim}) <=> p.v) + 0
    LIMIT %(limit)s
) c
WHERE 1 - c.d >= %(floor)s
ORDER BY p.ord, c.d
"""


def _nearest(
    *,
    project: Project,
    model: str,
    owners: Sequence[str],
    vectors: Sequence[Any],
    statuses: Sequence[str],
    limit: int,
    unexpired: bool = False,
    floor: float = -1.0,
) -> list[tuple[int, str, float]]:
    """NEAREST_SQL's rows (ord from 1, memory id, cosine) for each owner's vector."""
    params: dict[str, Any] = {
        "owners": list(owners),
        "vectors": [vector_literal(vector) for vector in vectors],
        "model": model,
        "project": project.pk,
        "statuses": list(statuses),
        "unexpired": unexpired,
        "limit": limit,
        "pick": max(NEAREST_PICK, limit),
        "floor": floor,
    }
    with connection.cursor() as cursor:
        cursor.execute(NEAREST_SQL.format(dim=len(vectors[0])), params)
        return [(int(ord_), memory_id, float(cosine)) for ord_, memory_id, cosine in cursor.fetchall()]


@dataclass(frozen=True)
class Similar:
    memory: Memory
    cosine: float


def similar_memories(*, project: Project, queries: Sequence[tuple[str, str]], limit: int = 3) -> list[list[Similar]]:
    """For each ``(user_id, text)``: up to ``limit`` active memories that user sees whose
    vector under the project's active model is closest to the text's, best first, from
    ``SIMILAR_MIN_COSINE`` up. The texts are embedded in one batch (through the vector
    cache) and searched in one statement, so a page of 5 or 100 proposals costs the same
    queries; when the embedder fails, nothing is found (the caller says so)."""
    if not queries:
        return []
    model = active_model(project)
    vectors = embed_texts([text for _, text in queries], embedder=embedder_for_model(model))
    rows = _nearest(
        project=project,
        model=model,
        owners=[user_id for user_id, _ in queries],
        vectors=list(vectors),
        statuses=[Status.ACTIVE],
        limit=limit,
        unexpired=True,
        floor=SIMILAR_MIN_COSINE,
    )
    memories = Memory.objects.in_bulk([memory_id for _, memory_id, _ in rows])
    found: list[list[Similar]] = [[] for _ in queries]
    for ord_, memory_id, cosine in rows:
        if (memory := memories.get(uuid.UUID(memory_id))) is not None:
            found[ord_ - 1].append(Similar(memory=memory, cosine=cosine))
    return found

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
from memories.models import Embedding, Memory, Project
from memories.selectors import LIVE_STATUSES, visible_q
from retrieval.embedders import EmbedderError, embedder_for_model
from retrieval.memory_vectors import active_model
from retrieval.vector_cache import embed_texts

NEAR_DUPLICATE_SIMILARITY = 0.95


@dataclass(frozen=True)
class NearDuplicate:
    memory_id: str
    similarity: float


def has_vectors(*, project: Project, user_id: str, model: str) -> bool:
    """Whether any live memory the user sees has a vector of ``model`` (else skip embedding)."""
    return _vectors(project=project, user_id=user_id, model=model).exists()


# The nearest rows the half-precision copies pick, in each of the two groups a user sees (their
# own, the project's shared), before the full vectors order them and the live ones are kept: the
# search's exact read (retrieval/search.py, HALF_SPARE). A user's 10,000 vectors: 44 ms p50 by a
# scan of the full vectors through the table, ~7 ms so (DECISIONS.md, issue 12, session 15).
NEAREST_PICK = 20
_NEAREST_SQL = """
WITH q AS MATERIALIZED (
    SELECT %(vector)s::vector({dim}) AS v, l2_normalize(%(vector)s::vector({dim}))::halfvec({dim}) AS h
),
picked AS (
    (SELECT e.memory_id FROM memories_embedding e, q
     WHERE e.model = %(model)s AND e.project_id = %(project)s AND e.user_id = %(user)s
     ORDER BY (e.vector_half::halfvec({dim}) <=> q.h) + 0 LIMIT %(pick)s)
    UNION ALL
    (SELECT e.memory_id FROM memories_embedding e, q
     WHERE e.model = %(model)s AND e.project_id = %(project)s AND e.scope = 'project' AND e.user_id <> %(user)s
     ORDER BY (e.vector_half::halfvec({dim}) <=> q.h) + 0 LIMIT %(pick)s)
)
SELECT e.memory_id::text, e.vector::vector({dim}) <=> q.v
FROM picked
JOIN memories_embedding e ON e.memory_id = picked.memory_id AND e.model = %(model)s
JOIN memories_memory m ON m.id = e.memory_id AND m.status = ANY(%(live)s), q
ORDER BY (e.vector::vector({dim}) <=> q.v) + 0
LIMIT 1
"""


def nearest_memory(*, project: Project, user_id: str, model: str, vector: Any) -> NearDuplicate | None:
    """The live visible memory closest to ``vector`` by cosine: among the ``NEAREST_PICK`` nearest
    of each group by the half-precision copies, ordered by the full vectors; when none of those is
    live (all superseded, say), by an exact scan of the user's live rows."""
    params: dict[str, Any] = {
        "vector": vector_literal(vector),
        "model": model,
        "project": project.pk,
        "user": user_id,
        "pick": NEAREST_PICK,
        "live": list(LIVE_STATUSES),
    }
    with connection.cursor() as cursor:
        cursor.execute(_NEAREST_SQL.format(dim=len(vector)), params)
        found = cursor.fetchone()
    if found is not None:
        return NearDuplicate(memory_id=found[0], similarity=1.0 - float(found[1]))
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

# One statement for a whole review page: per proposal, the active memories its end user sees
# (the visibility rule of the search and of nearest_memory), nearest first: NEAREST_PICK per group
# by the half-precision copies, ordered by the full vectors. "+ 0" keeps every ordering off the
# HNSW index: ordered by it, a walk without the search's iterative scan filtered to one user's rows
# of the whole project's graph, and 8 of 40 cards at 100k memories missed memories an exact scan
# finds (DECISIONS.md, issue 12, session 15).
SIMILAR_SQL = """
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
    WHERE m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
    ORDER BY (e.vector::vector({dim}) <=> p.v) + 0
    LIMIT %(limit)s
) c
WHERE 1 - c.d >= %(floor)s
ORDER BY p.ord, c.d
"""


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
    params: dict[str, Any] = {
        "owners": [user_id for user_id, _ in queries],
        "vectors": [vector_literal(row) for row in vectors],
        "model": model,
        "project": project.pk,
        "limit": limit,
        "pick": max(NEAREST_PICK, limit),
        "floor": SIMILAR_MIN_COSINE,
    }
    with connection.cursor() as cursor:
        cursor.execute(SIMILAR_SQL.format(dim=int(vectors.shape[1])), params)
        rows = cursor.fetchall()
    memories = Memory.objects.in_bulk([memory_id for _, memory_id, _ in rows])
    found: list[list[Similar]] = [[] for _ in queries]
    for ord_, memory_id, cosine in rows:
        if (memory := memories.get(uuid.UUID(memory_id))) is not None:
            found[int(ord_) - 1].append(Similar(memory=memory, cosine=float(cosine)))
    return found

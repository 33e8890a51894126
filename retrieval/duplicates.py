"""Near-duplicates by meaning: the live memory a user sees whose vector is closest to a text's.

Capture asks before writing a memory (``capture.services``); the search is an exact cosine
scan of one user's live rows under the project's active model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from pgvector.django import CosineDistance

from memories.models import Embedding, Project
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


def nearest_memory(*, project: Project, user_id: str, model: str, vector: Any) -> NearDuplicate | None:
    """The live visible memory closest to ``vector`` by cosine (exact scan of the user's rows)."""
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

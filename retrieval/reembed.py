"""Switching a project's embedding model without a moment of half-built search.

1. Build the new model's vectors beside the old ones (batches; progress in Redis).
2. Catch up memories created or edited meanwhile; build the model's HNSW index.
3. In one transaction: point the project at the new model, and mark any memory still
   without a new vector ``pending`` (the sweeper embeds it).
4. After a grace period, drop the old vectors. A search embeds its query with the
   model it read at its start and filters on that model, so one that started just
   before the switch still finds the old, complete set.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef

from memories.models import Embedding, EmbeddingStatus, Memory, Project, Status
from retrieval.embedders import embedder_for_model
from retrieval.embedding import active_model, embed_texts, ensure_vector_index, redis_client, store_vectors

BATCH = 256
OLD_VECTORS_GRACE_SECONDS = 60
PROGRESS_TTL = 24 * 3600

Progress = Callable[[int, int], None]


def progress_key(project_id: int) -> str:
    return f"memoryhub:reembed:{project_id}"


def set_progress(project_id: int, **state: Any) -> None:
    # Progress is informational: never fail the job over it.
    with contextlib.suppress(Exception):
        redis_client().set(progress_key(project_id), json.dumps(state), ex=PROGRESS_TTL)


def get_progress(project_id: int) -> dict[str, Any] | None:
    """The last reported state of a project's re-embed (``None`` if none ran lately)."""
    raw = redis_client().get(progress_key(project_id))
    return json.loads(raw) if raw else None


def _missing(project: Project, model: str) -> Any:
    # A vector of older content (an edit raced the rebuild) counts as missing.
    has_vector = Embedding.objects.filter(memory=OuterRef("pk"), model=model, content_hash=OuterRef("content_hash"))
    return (
        Memory.objects.filter(project=project).exclude(status=Status.DELETED).exclude(Exists(has_vector)).order_by("pk")
    )


def _build(project: Project, model: str, *, report: Progress) -> int:
    embedder = embedder_for_model(model)
    total = _missing(project, model).count()
    done = 0
    dimension = 0
    for _round in range(3):  # the first pass, then catch up writes made meanwhile
        before = done
        last_pk = None
        while batch := list(
            (_missing(project, model).filter(pk__gt=last_pk) if last_pk else _missing(project, model))[:BATCH]
        ):
            vectors = embed_texts([m.content for m in batch], embedder=embedder)
            dimension = int(vectors.shape[1])
            store_vectors(batch, vectors, model=model)
            last_pk = batch[-1].pk
            done += len(batch)
            report(done, max(total, done))
        if done == before:
            break
    if dimension:
        ensure_vector_index(model, dimension)
    return done


def reembed_project(*, project_id: int, model: str, report: Progress | None = None) -> dict[str, Any]:
    """Build ``model``'s vectors for the project, then make it the active model."""
    project = Project.objects.get(pk=project_id)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        set_progress(project_id, model=model, status="running", done=done, total=total)
        if report:
            report(done, total)

    progress(0, _missing(project, model).count())
    embedded = _build(project, model, report=progress)
    previous = switch_model(project_id=project_id, model=model)
    result = {
        "model": model,
        "previous": previous,
        "embedded": embedded,
        "seconds": round(time.monotonic() - started, 2),
    }
    set_progress(project_id, status="done", done=embedded, total=embedded, **result)
    return result


def switch_model(*, project_id: int, model: str) -> str:
    """Point the project at ``model`` in one transaction; returns the previous model."""
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project_id)
        previous = active_model(project)
        project.active_embedding_model = model
        project.save(update_fields=["active_embedding_model"])
        Memory.objects.filter(pk__in=_missing(project, model).values("pk")).update(
            embedding_status=EmbeddingStatus.PENDING
        )
    return previous


def drop_inactive_vectors(*, project_id: int) -> int:
    """Delete the project's vectors of every model but the active one."""
    project = Project.objects.get(pk=project_id)
    deleted, _ = Embedding.objects.filter(project=project).exclude(model=active_model(project)).delete()
    return deleted

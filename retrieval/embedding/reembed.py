"""Switching a project's embedding model without a moment of half-built search.

1. Build the new model's vectors beside the old ones (batches; progress in Redis), in steps
   of a few minutes (:func:`reembed_step`): a step stores what it embedded, so the next one
   resumes where it stopped and a worker that dies loses one step, not the whole job.
2. Catch up memories created or edited meanwhile; build the model's HNSW index
   (``CONCURRENTLY``: writers are not blocked; progress as ``status: "indexing"``).
3. In one transaction: point the project at the new model, and mark any memory still
   without a new vector ``pending`` (the sweeper embeds it), and every message embedded with
   another model as awaiting its vector (the message sweeper embeds it again).
4. After a grace period, drop the old vectors. A search embeds its query with the
   model it read at its start and filters on that model, so one that started just
   before the switch still finds the old, complete set.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef

from common.redis import redis_client
from conversations.models import Message
from memories.models import Embedding, EmbeddingStatus, Memory, Project, Status
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.vectors.memory_vectors import active_model, store_vectors
from retrieval.vectors.vector_index import ensure_needed_index

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


def reembed_step(
    *, project_id: int, model: str, budget_s: float, batch: int = BATCH, report: Progress | None = None
) -> dict[str, Any] | None:
    """Embed the project's memories that lack a ``model`` vector for about ``budget_s`` seconds
    (at least one batch). When none is left: build the index, switch the project and return
    the result; while work remains, None (call again to resume)."""
    project = Project.objects.get(pk=project_id)
    started = _started_at(project_id, model)
    total = Memory.objects.filter(project=project).exclude(status=Status.DELETED).count()
    done = total - _missing(project, model).count()
    _progress(project_id, model, done, total, started, report)
    embedder = embedder_for_model(model)
    deadline = time.monotonic() + budget_s

    def after(pk: Any) -> list[Memory]:
        return list((_missing(project, model).filter(pk__gt=pk) if pk else _missing(project, model))[:batch])

    def embed(rows: list[Memory]) -> Any:
        return embed_texts([m.content for m in rows], embedder=embedder)

    # While a batch is stored (Postgres's work, above all the HNSW inserts), the next one embeds on
    # another thread, as ``embed_memories`` does (bench_embed, 10,000 memories through Celery: 34.9 and
    # 36.2 s without the overlap, 29.2 and 31.4 s with it).
    ahead = ThreadPoolExecutor(1, thread_name_prefix="reembed-ahead")
    try:
        rounds, last_pk, pending = 0, None, None
        while rounds < 3:  # the pass over what was missing, then catch up writes made meanwhile
            if pending is not None:
                (rows, embedding), pending = pending, None
                vectors = embedding.result()
            else:
                rows = after(last_pk)
                if not rows:
                    rounds, last_pk = rounds + 1, None
                    if not _missing(project, model).exists():
                        break
                    continue
                vectors = embed(rows)
            if following := after(rows[-1].pk):
                pending = (following, ahead.submit(embed, following))
            store_vectors(rows, vectors, model=model)
            last_pk, done = rows[-1].pk, done + len(rows)
            _progress(project_id, model, done, total, started, report)
            if time.monotonic() >= deadline:
                return None
    finally:
        ahead.shutdown(wait=True, cancel_futures=True)
    return _finish(project_id, model, total, started)


def _finish(project_id: int, model: str, total: int, started: float) -> dict[str, Any]:
    dimension = Embedding.objects.filter(project_id=project_id, model=model).values_list("dimension", flat=True).first()
    if dimension:
        set_progress(project_id, model=model, status="indexing", done=total, total=total, started=started)
        ensure_needed_index(model, dimension)
    previous = switch_model(project_id=project_id, model=model)
    embedded = Embedding.objects.filter(project_id=project_id, model=model).count()
    result = {"model": model, "previous": previous, "embedded": embedded, "seconds": round(time.time() - started, 2)}
    set_progress(project_id, status="done", done=total, total=total, **result)
    return result


def _started_at(project_id: int, model: str) -> float:
    """When this re-embed began: kept in its progress across steps."""
    with contextlib.suppress(Exception):
        state = get_progress(project_id) or {}
        if state.get("model") == model and state.get("status") in ("running", "indexing") and state.get("started"):
            return float(state["started"])
    return time.time()


def _progress(project_id: int, model: str, done: int, total: int, started: float, report: Progress | None) -> None:
    done = min(done, total)
    set_progress(project_id, model=model, status="running", done=done, total=total, started=started)
    if report:
        report(done, total)


def reembed_project(*, project_id: int, model: str, report: Progress | None = None) -> dict[str, Any]:
    """Build ``model``'s vectors for the project, then make it the active model (in one go)."""
    result = None
    while result is None:
        result = reembed_step(project_id=project_id, model=model, budget_s=math.inf, report=report)
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
        # The messages' vectors are the old model's, which episodes no longer search by meaning:
        # the message sweeper embeds them again with this one.
        Message.objects.filter(conversation__project=project).exclude(embedding_model__in=("", model)).update(
            embedding_model="", embedding=None, passage_vectors=None
        )
    return previous


def drop_inactive_vectors(*, project_id: int) -> int:
    """Delete the project's vectors of every model but the active one."""
    project = Project.objects.get(pk=project_id)
    deleted, _ = Embedding.objects.filter(project=project).exclude(model=active_model(project)).delete()
    return deleted

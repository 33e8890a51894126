"""Vectors for memories: which model a project uses, embedding and storing them as
:class:`Embedding` rows, and the services' hook that embeds inline or queues the work.

Texts are embedded through the cache in ``retrieval.embedding.vector_cache``; their HNSW indexes are
``retrieval.vectors.vector_index``; conversation messages have theirs in ``retrieval.vectors.message_vectors``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memories.fields import binary_vectors, use_binary_vectors
from memories.models import Embedding, EmbeddingStatus, Memory, Project
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.embedding.mpnet_embedder import MPNET_MODEL_NAME
from retrieval.embedding.openai_embedder import DEFAULT_OPENAI_MODEL
from retrieval.embedding.protocol import EmbedderError, Vectors
from retrieval.embedding.vector_cache import embed_texts
from retrieval.queueing import queue_embedding

log = logging.getLogger(__name__)

# Memories written per transaction while the next ones embed (embed_memories).
STORE_CHUNK = 64


def default_model_name() -> str:
    """The configured embedder's model name, without loading the model."""
    if settings.MEMORYHUB_EMBEDDER == "openai":
        return settings.MEMORYHUB_EMBEDDING_MODEL or DEFAULT_OPENAI_MODEL
    if settings.MEMORYHUB_EMBEDDER == "local-mpnet":
        return MPNET_MODEL_NAME
    return LOCAL_MODEL_NAME


def active_model(project: Project) -> str:
    """The model whose vectors the project's searches use."""
    return project.active_embedding_model or default_model_name()


# One upsert per batch. Server-side parameters, so the vectors travel in binary (memories.fields):
# Django's client-side binding would format and quote ~3.5 kB of text a vector, which Postgres
# then parses back. The columns and conflict target are the model's (Embedding, its unique
# (memory, model)); created_at is the write's time, as auto_now_add set it.
_UPSERT_SQL = f"""
INSERT INTO {Embedding._meta.db_table}
    (memory_id, project_id, user_id, scope, model, dimension, vector, content_hash, created_at)
SELECT r.memory_id, r.project_id, r.user_id, r.scope, %(model)s, %(dimension)s, r.vector, r.content_hash, now()
FROM unnest(%(memory_ids)s::uuid[], %(project_ids)s::bigint[], %(user_ids)s::text[], %(scopes)s::text[],
            %(vectors)b, %(hashes)s::text[]) AS r(memory_id, project_id, user_id, scope, vector, content_hash)
ON CONFLICT (memory_id, model) DO UPDATE
    SET vector = EXCLUDED.vector, dimension = EXCLUDED.dimension, user_id = EXCLUDED.user_id,
        scope = EXCLUDED.scope, content_hash = EXCLUDED.content_hash, created_at = EXCLUDED.created_at
"""


def store_vectors(memories: Sequence[Memory], vectors: Vectors, *, model: str) -> None:
    """Upsert one Embedding row per memory for ``model``."""
    if len(memories) != len(vectors):
        raise ValueError(f"{len(memories)} memories but {len(vectors)} vectors")
    if not memories:
        return
    connection.ensure_connection()
    # Django's own error types (DatabaseError, IntegrityError), as its cursors raise them.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        use_binary_vectors(cursor)
        cursor.execute(
            _UPSERT_SQL,
            {
                "model": model,
                "dimension": int(vectors.shape[1]),
                "memory_ids": [memory.pk for memory in memories],
                "project_ids": [memory.project_id for memory in memories],
                "user_ids": [memory.user_id for memory in memories],
                "scopes": [memory.scope for memory in memories],
                "vectors": binary_vectors(vectors),
                "hashes": [memory.content_hash for memory in memories],
            },
        )


def embed_memories(memories: Sequence[Memory], *, model: str | None = None) -> int:
    """Embed memories (with their project's active model, or ``model``) and store the vectors.

    Marks them ``ready``, a slice of ``STORE_CHUNK`` at a time: while one slice is written, the
    next one embeds on another thread (the writes are Postgres's work and Python's, the
    embedding onnxruntime's or the remote embedder's). Raises EmbedderError when the embedder
    fails, leaving the memories not yet stored as they were. Returns how many were embedded.
    """
    by_model: dict[str, list[Memory]] = {}
    for memory in memories:
        by_model.setdefault(model or active_model(memory.project), []).append(memory)
    for name, group in by_model.items():
        embedder = embedder_for_model(name)
        chunks = [group[start : start + STORE_CHUNK] for start in range(0, len(group), STORE_CHUNK)]
        mark_ready = model is None or all(name == active_model(m.project) for m in group)
        if len(chunks) == 1:
            _store(chunks[0], embed_texts([m.content for m in group], embedder=embedder), model=name, ready=mark_ready)
            continue
        with ThreadPoolExecutor(1, thread_name_prefix="embed-ahead") as ahead:
            pending = ahead.submit(embed_texts, [m.content for m in chunks[0]], embedder=embedder)
            for index, chunk in enumerate(chunks):
                vectors = pending.result()
                if index + 1 < len(chunks):
                    pending = ahead.submit(embed_texts, [m.content for m in chunks[index + 1]], embedder=embedder)
                _store(chunk, vectors, model=name, ready=mark_ready)
    return len(memories)


def _store(memories: Sequence[Memory], vectors: Vectors, *, model: str, ready: bool) -> None:
    with transaction.atomic():
        store_vectors(memories, vectors, model=model)
        if ready:
            _mark_ready(memories)


def _mark_ready(memories: Sequence[Memory]) -> None:
    # Only rows whose content is still what we embedded: an edit racing us stays pending.
    # One statement for the batch (an UPDATE per memory cost ~0.4 ms each on bulk loads).
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Memory._meta.db_table} m SET embedding_status = %s, embedding_error = ''"
            " FROM unnest(%s::uuid[], %s::text[]) AS done(id, content_hash)"
            " WHERE m.id = done.id AND m.content_hash = done.content_hash",
            [EmbeddingStatus.READY, [str(m.pk) for m in memories], [m.content_hash for m in memories]],
        )


def record_failure(memory_ids: Sequence[Any], error: Exception, *, final: bool) -> None:
    """Keep the error on the rows: ``pending`` while retries remain, ``failed`` after."""
    status = EmbeddingStatus.FAILED if final else EmbeddingStatus.PENDING
    for memory_id in memory_ids:
        memory = Memory.objects.filter(pk=memory_id).exclude(embedding_status=EmbeddingStatus.READY).first()
        if memory is None:
            continue
        Memory.objects.filter(pk=memory_id).update(
            embedding_status=status,
            embedding_error=str(error)[:2000],
            embedding_attempts=memory.embedding_attempts + 1,
            updated_at=timezone.now(),
        )


def embed_now_or_later(memories: Sequence[Memory], inline: bool) -> None:
    """The services' hook: embed before answering when asked, else (or on failure) in Celery."""
    if inline:
        try:
            embed_memories(memories)
            return
        except EmbedderError as error:
            log.warning("inline embedding failed, queued for the background: %s", error)
            record_failure([m.pk for m in memories], error, final=False)
    queue_embedding([str(m.pk) for m in memories])

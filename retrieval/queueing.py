"""Queueing retrieval's background work by task name (the tasks are in ``retrieval/tasks.py``).

The names are the ones the tasks were first published under, when they lived in
``capture/tasks.py``; messages already queued and the beat schedule still use them.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.queue import publish, publish_chunks

EMBED_MEMORIES_TASK = "capture.tasks.embed_memories_task"
SWEEP_EMBEDDINGS_TASK = "capture.tasks.sweep_embeddings"
REEMBED_PROJECT_TASK = "capture.tasks.reembed_project_task"
DROP_OLD_VECTORS_TASK = "capture.tasks.drop_old_vectors_task"
EMBED_MESSAGES_TASK = "capture.tasks.embed_messages_task"
SWEEP_MESSAGE_EMBEDDINGS_TASK = "capture.tasks.sweep_message_embeddings"
REFRESH_KEYWORD_STATS_TASK = "retrieval.tasks.refresh_keyword_stats_task"
BUILD_VECTOR_INDEX_TASK = "retrieval.tasks.build_vector_index_task"

EMBED_CHUNK = 128
MESSAGE_EMBED_CHUNK = 128


def queue_embedding(memory_ids: Sequence[str]) -> None:
    """Queue background embedding; if the broker is down, the sweeper catches up later."""
    waiting = f"{len(memory_ids)} memories wait for the embedding sweeper"
    publish_chunks(EMBED_MEMORIES_TASK, memory_ids, EMBED_CHUNK, waiting=waiting)


def queue_message_embedding(message_ids: Sequence[str]) -> None:
    """Queue embedding of conversation messages; the message sweeper catches up after an outage."""
    waiting = f"{len(message_ids)} messages wait for the message-embedding sweeper"
    publish_chunks(EMBED_MESSAGES_TASK, message_ids, MESSAGE_EMBED_CHUNK, waiting=waiting)


def queue_vector_index(model: str, dimension: int) -> None:
    """Queue the build of ``model``'s HNSW index; if the broker is down, the next sweep queues it."""
    publish(BUILD_VECTOR_INDEX_TASK, (model, dimension), waiting=f"the {model} vector index waits for the sweeper")

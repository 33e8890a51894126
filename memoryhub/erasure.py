"""Erase one end user of a project: every row that holds what they said or what was kept of it.

``erase_user`` deletes, in one transaction, the user's memories (with their revisions, links
and vectors), conversations (with messages), capture jobs, retrieval log rows, scratchpad
entries, keyword statistics and consolidation runs, and then drops the Redis entries derived from them: the session
tails of their conversations and the cached vectors of their memories' and messages' texts.
It returns the count per kind as evidence. Used by ``manage.py erase_user`` and
``DELETE /api/v1/users/{user_id}`` (docs/adr/0016-erasing-a-user.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import redis
from django.db import transaction

from capture.models import CaptureJob
from common.redis import redis_client
from consolidation.models import ConsolidationRun, ConsolidationState
from conversations.models import Conversation, Message
from conversations.session import session_key
from memories.models import (
    Embedding,
    Memory,
    MemoryEdge,
    MemoryRevision,
    Project,
    ScratchpadEntry,
)
from profiles.models import Profile
from retrieval.embedding.vector_cache import cache_key, cache_names
from retrieval.models import KeywordStats, RetrievalLog
from retrieval.vectors.message_vectors import passage_texts, searched_text

log = logging.getLogger(__name__)


def erase_user(*, project: Project, user_id: str) -> dict[str, int]:
    """Delete everything ``user_id`` left in ``project``; the number of rows (and cache entries) per kind."""
    with transaction.atomic(durable=True):
        memories = Memory.objects.filter(project=project, user_id=user_id)
        memory_ids = list(memories.values_list("pk", flat=True))
        conversations = Conversation.objects.filter(project=project, user_id=user_id)
        said = list(Message.objects.filter(conversation__in=conversations).only("role", "content", "context"))
        # A message's vectors are cached under the texts they were embedded from (with its
        # context, and each of its passages).
        texts = [*memories.values_list("content", flat=True), *(m.content for m in said), *map(searched_text, said)]
        texts += [text for message in said for text in passage_texts(message)]
        models = {*Embedding.objects.filter(memory_id__in=memory_ids).values_list("model", flat=True)}
        models |= {*Message.objects.filter(conversation__in=conversations).values_list("embedding_model", flat=True)}
        models.discard("")
        conversation_ids = list(conversations.values_list("pk", flat=True))
        counts = {
            "memories": len(memory_ids),
            "revisions": MemoryRevision.objects.filter(memory_id__in=memory_ids).count(),
            "links": MemoryEdge.objects.filter(from_memory_id__in=memory_ids).count()
            + MemoryEdge.objects.filter(to_memory_id__in=memory_ids).exclude(from_memory_id__in=memory_ids).count(),
            "embeddings": Embedding.objects.filter(memory_id__in=memory_ids).count(),
            "conversations": len(conversation_ids),
            "messages": Message.objects.filter(conversation_id__in=conversation_ids).count(),
        }
        # Another user's successor may supersede one of these (a shared memory): it stays,
        # without the pointer. The user's own chain links go with the rows.
        Memory.objects.filter(supersedes_id__in=memory_ids).update(supersedes=None)
        memories.delete()
        conversations.delete()
        counts["capture_jobs"] = _delete(CaptureJob.objects.filter(project=project, user_id=user_id))
        # Their consolidations (each run's actions went with the memories they name, or go with it).
        counts["consolidations"] = _delete(ConsolidationRun.objects.filter(project=project, user_id=user_id))
        ConsolidationState.objects.filter(project=project, user_id=user_id).delete()
        counts["retrieval_logs"] = _delete(RetrievalLog.objects.filter(project=project, user_id=user_id))
        counts["scratchpad_entries"] = _delete(ScratchpadEntry.objects.filter(project=project, user_id=user_id))
        counts["keyword_stats"] = _delete(KeywordStats.objects.filter(project=project, owner=user_id))
        # The profile quotes the memories (every version of it does): it goes with them.
        counts["profiles"] = _delete(Profile.objects.filter(project=project, user_id=user_id))
    counts["cache_entries"] = _drop_cached(conversation_ids, texts, models)
    log.info("erased user %r of project %s: %s", user_id, project.slug, counts)
    return counts


def _delete(queryset: Any) -> int:
    return int(queryset.delete()[1].get(queryset.model._meta.label, 0))


def _drop_cached(conversation_ids: Iterable[Any], texts: list[str], models: set[str]) -> int:
    """Session tails and cached text vectors; Redis being down leaves them to expire (TTLs)."""
    keys = [session_key(c) for c in conversation_ids]
    keys += [cache_key(name, text) for model in models for name in cache_names(model) for text in texts]
    if not keys:
        return 0
    try:
        return int(redis_client().delete(*keys))
    except redis.RedisError:
        log.warning("erasure: Redis unavailable; %d cache entries are left to expire", len(keys))
        return 0

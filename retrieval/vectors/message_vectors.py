"""Vectors of conversation messages (user and assistant turns with text), for the observation
and conversation searches. Embedded in the background; ``sweep_message_embeddings`` queues
what a lost message or an outage left without a vector."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from conversations.models import Message
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.queueing import queue_message_embedding
from retrieval.vectors.memory_vectors import active_model

# Only these roles are embedded; system and tool messages are not searched by meaning.
EMBEDDED_ROLES = ("user", "assistant")


def messages_awaiting_embedding(*, older_than: datetime, limit: int) -> list[str]:
    """Ids of user/assistant messages with text and no vector, created before ``older_than``."""
    queryset = Message.objects.filter(embedding_model="", role__in=EMBEDDED_ROLES, created_at__lt=older_than)
    return [str(pk) for pk in queryset.exclude(content="").order_by("created_at").values_list("pk", flat=True)[:limit]]


def embed_messages(*, message_ids: Sequence[str]) -> int:
    """Embed messages that have no vector yet with their project's active model; how many."""
    messages = list(
        Message.objects.select_related("conversation__project")
        .filter(pk__in=message_ids, embedding_model="", role__in=EMBEDDED_ROLES)
        .exclude(content="")
    )
    by_model: dict[str, list[Message]] = {}
    for message in messages:
        by_model.setdefault(active_model(message.conversation.project), []).append(message)
    for model, group in by_model.items():
        vectors = embed_texts([searched_text(m) for m in group], embedder=embedder_for_model(model))
        for message, vector in zip(group, vectors, strict=True):
            Message.objects.filter(pk=message.pk, embedding_model="").update(embedding=vector, embedding_model=model)
    return len(messages)


def searched_text(message: Message) -> str:
    """What a message's vector stands for: the message, after the one it replies to."""
    return f"{message.context}\n{message.content}" if message.context else message.content


def queue_for_embedding(messages: Sequence[Message]) -> None:
    """The conversations' hook: queue the new messages that will be embedded."""
    queue_message_embedding([str(m.pk) for m in messages if m.role in EMBEDDED_ROLES and m.content.strip()])

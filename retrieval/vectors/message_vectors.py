"""Vectors of conversation messages (user and assistant turns with text), for the observation
and conversation searches. Embedded in the background; ``sweep_message_embeddings`` queues
what a lost message or an outage left without a vector."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from django.db.models import Q

from conversations.models import Message
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.queueing import queue_message_embedding
from retrieval.vectors.memory_vectors import active_model

# Only these roles are embedded; system and tool messages are not searched by meaning.
EMBEDDED_ROLES = ("user", "assistant")


# A message still to embed: no vector yet, or (a user's, embedded before messages had passages)
# no passage vectors; b"" says it has none to have.
_AWAITING = Q(embedding_model="") | Q(role="user", passage_vectors__isnull=True)


def messages_awaiting_embedding(*, older_than: datetime, limit: int) -> list[str]:
    """Ids of user/assistant messages with text still to embed (``_AWAITING``), created before ``older_than``."""
    queryset = Message.objects.filter(_AWAITING, role__in=EMBEDDED_ROLES, created_at__lt=older_than)
    return [str(pk) for pk in queryset.exclude(content="").order_by("created_at").values_list("pk", flat=True)[:limit]]


def embed_messages(*, message_ids: Sequence[str]) -> int:
    """Embed the messages still to embed with their project's active model; how many."""
    messages = list(
        Message.objects.select_related("conversation__project")
        .filter(_AWAITING, pk__in=message_ids, role__in=EMBEDDED_ROLES)
        .exclude(content="")
    )
    by_model: dict[str, list[Message]] = {}
    for message in messages:
        by_model.setdefault(active_model(message.conversation.project), []).append(message)
    for model, group in by_model.items():
        pieces = [passage_texts(m) for m in group]
        texts = [searched_text(m) for m in group] + [text for each in pieces for text in each]
        vectors = np.asarray(embed_texts(texts, embedder=embedder_for_model(model)), dtype=np.float32)
        start = len(group)
        for message, vector, each in zip(group, vectors[: len(group)], pieces, strict=True):
            rows = vectors[start : start + len(each)]
            start += len(each)
            Message.objects.filter(_AWAITING, pk=message.pk).update(
                embedding=vector, embedding_model=model, passage_vectors=rows.tobytes()
            )
    return len(messages)


def searched_text(message: Message) -> str:
    """What a message's vector stands for: the message, after the one it replies to."""
    return f"{message.context}\n{message.content}" if message.context else message.content


# Where a chat message turns to another thing: a sentence's end, a line, a semicolon, or a new
# subject after a comma or "and/but/so" ("..., i'm lactose intolerant and whey wrecks my stomach").
_SUBJECT = r"(?=(?:i|i'm|im|i've|ive|my|we|we're|our|me and|me n)\s)"
_PASSAGE_BREAK = re.compile(
    r"(?<=[.!?])\s+|\s*[\n;]\s*|\s+[-–—]\s+"
    rf"|,\s+(?:(?:and|but|so|plus|also|tbh|btw)\s+)?{_SUBJECT}|\s+(?:and|but|so|plus|tbh|btw)\s+{_SUBJECT}",
    re.IGNORECASE,
)
# A piece shorter than this many words ("yes pls", "lol") says nothing a question could ask for.
_PASSAGE_WORDS = 3
# A message's passages are its first few: a pasted page costs no more than this many embeddings.
MAX_PASSAGES = 8


def passages(content: str) -> list[str]:
    """The sentences and clauses of a message, each of at least ``_PASSAGE_WORDS`` words."""
    pieces = [p.strip(" ,.!?") for p in _PASSAGE_BREAK.split(content)]
    return [p for p in pieces if len(p.split()) >= _PASSAGE_WORDS][:MAX_PASSAGES]


def passage_texts(message: Message) -> list[str]:
    """What a user message's passage vectors stand for: its passages, or the message alone when
    its whole vector was embedded with the context before it (none when the two are the same)."""
    if message.role != "user":
        return []
    pieces = passages(message.content)
    if len(pieces) > 1:
        return pieces
    return [message.content] if message.context else []


def queue_for_embedding(messages: Sequence[Message]) -> None:
    """The conversations' hook: queue the new messages that will be embedded."""
    queue_message_embedding([str(m.pk) for m in messages if m.role in EMBEDDED_ROLES and m.content.strip()])

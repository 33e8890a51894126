"""Reads of durable conversations: one conversation, its messages, its recent tail."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from common.errors import Invalid, NotFound
from conversations.models import Conversation, Message
from conversations.session import session_recent, session_store
from memories.models import Project


def message_state(message: Message) -> dict[str, Any]:
    """The JSON a message is cached and windowed as: role and content plus its extra parts."""
    return {**message.extra, "seq": message.seq, "role": message.role, "content": message.content}


def conversation_get(*, project: Project, user_id: str, conversation_id: Any) -> Conversation:
    """A conversation of ``user_id`` in ``project``, or NotFound (also for malformed ids)."""
    try:
        pk = uuid.UUID(str(conversation_id))
    except ValueError as error:
        raise NotFound("conversation not found") from error
    conversation = Conversation.objects.filter(project=project, user_id=user_id, pk=pk).first()
    if conversation is None:
        raise NotFound("conversation not found")
    return conversation


def conversation_messages(*, conversation: Conversation, after_seq: int = 0, limit: int = 200) -> list[Message]:
    """Messages after ``after_seq``, oldest first."""
    if after_seq < 0:
        raise Invalid("after must not be negative", code="invalid_cursor")
    return list(conversation.messages.filter(seq__gt=after_seq).order_by("seq")[:limit])


def conversation_tail(*, conversation: Conversation, limit: int, with_ids: bool = False) -> list[dict[str, Any]]:
    """The newest ``limit`` messages from Postgres as message states, oldest first (with each
    message's ``message_id`` and ``timestamp`` when ``with_ids``: a capture window's provenance)."""
    newest = reversed(list(conversation.messages.order_by("-seq")[:limit]))
    if not with_ids:
        return [message_state(m) for m in newest]
    return [
        {**message_state(m), "message_id": str(m.pk), **({"timestamp": m.said_at.isoformat()} if m.said_at else {})}
        for m in newest
    ]


def conversation_recent(*, conversation: Conversation, limit: int) -> tuple[list[dict[str, Any]], str]:
    """The newest ``limit`` messages and where they came from (``"redis"`` or ``"database"``).

    Reads the Redis tail; when Redis has lost it, rebuilds it from Postgres. A message
    committed while rebuilding could be missing from the rebuilt tail, so the tail is
    dropped again if the conversation grew meanwhile: the next reader rebuilds it.
    """
    size = int(settings.MEMORYHUB_SESSION_MESSAGES)
    cached = session_recent(conversation_id=conversation.pk, limit=min(limit, size))
    if cached is not None:
        return cached, "redis"
    tail = conversation_tail(conversation=conversation, limit=size)
    session_store(conversation_id=conversation.pk, messages=tail)
    grown = conversation.messages.filter(seq__gt=tail[-1]["seq"] if tail else 0).exists()
    if grown:
        session_store(conversation_id=conversation.pk, messages=[])
    return tail[-limit:], "database"

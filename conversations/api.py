"""The conversation endpoints of docs/api.md: durable conversations and their messages.

``ChatMessageIn`` (the message every endpoint that takes chat messages accepts) is in
``conversations/schemas.py``; the other schemas serve only this router.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field, StringConstraints

from common.auth import ERRORS, api_key
from common.idempotency import idempotent
from conversations import selectors as conversation_selectors
from conversations import services as conversation_services
from conversations.models import Conversation, Message
from conversations.schemas import ChatMessageIn
from memories.schemas import StrictSchema, UserId

router = Router(tags=["conversations"])


class ConversationIn(StrictSchema):
    user_id: UserId
    session_id: Annotated[str, StringConstraints(max_length=255)] = ""
    title: Annotated[str, StringConstraints(max_length=255)] = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class MessagesIn(StrictSchema):
    user_id: UserId
    messages: list[ChatMessageIn] = Field(min_length=1)


class MessageOut(Schema):
    id: str
    seq: int
    role: str
    content: str
    extra: dict[str, Any]
    correlation_id: str
    created_at: datetime


class MessagesOut(Schema):
    messages: list[MessageOut]


class ConversationOut(Schema):
    id: str
    user_id: str
    session_id: str
    title: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    messages: list[MessageOut]


class RecentOut(Schema):
    messages: list[dict[str, Any]]
    source: str


def message_out(message: Message) -> dict[str, Any]:
    return {
        "id": str(message.pk),
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "extra": message.extra,
        "correlation_id": message.correlation_id,
        "created_at": message.created_at,
    }


def conversation_out(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    fields = ("user_id", "session_id", "title", "metadata", "created_at", "updated_at")
    return {
        "id": str(conversation.pk),
        **{name: getattr(conversation, name) for name in fields},
        "messages": [message_out(m) for m in messages],
    }


@router.post("/conversations", response={201: ConversationOut, **ERRORS})
@idempotent
def create_conversation(request: HttpRequest, body: ConversationIn) -> Status[Any]:
    """Start a durable conversation."""
    conversation = conversation_services.conversation_create(project=api_key(request).project, **body.model_dump())
    return Status(201, conversation_out(conversation, []))


@router.post("/conversations/{conversation_id}/messages", response={201: MessagesOut, **ERRORS})
@idempotent
def add_messages(request: HttpRequest, conversation_id: str, body: MessagesIn) -> Status[Any]:
    """Append messages: stored in Postgres first, then cached in the session tail and embedded."""
    conversation = conversation_selectors.conversation_get(
        project=api_key(request).project, user_id=body.user_id, conversation_id=conversation_id
    )
    drafts = [conversation_services.message_draft(m.model_dump(mode="json", exclude_unset=True)) for m in body.messages]
    messages = conversation_services.messages_add(conversation=conversation, drafts=drafts)
    return Status(201, {"messages": [message_out(m) for m in messages]})


@router.get("/conversations/{conversation_id}", response={200: ConversationOut, **ERRORS})
def get_conversation(
    request: HttpRequest,
    conversation_id: str,
    user_id: UserId,
    after: int = Query(0, ge=0),  # type: ignore[type-arg]
    limit: int = Query(200, ge=1, le=1000),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """A conversation with its messages after seq ``after`` (oldest first, up to ``limit``)."""
    conversation = conversation_selectors.conversation_get(
        project=api_key(request).project, user_id=user_id, conversation_id=conversation_id
    )
    messages = conversation_selectors.conversation_messages(conversation=conversation, after_seq=after, limit=limit)
    return conversation_out(conversation, messages)


@router.get("/conversations/{conversation_id}/recent", response={200: RecentOut, **ERRORS})
def recent_messages(
    request: HttpRequest,
    conversation_id: str,
    user_id: UserId,
    limit: int = Query(settings.MEMORYHUB_SESSION_MESSAGES, ge=1, le=1000),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """The newest messages from the Redis session state (rebuilt from Postgres when lost)."""
    conversation = conversation_selectors.conversation_get(
        project=api_key(request).project, user_id=user_id, conversation_id=conversation_id
    )
    messages, source = conversation_selectors.conversation_recent(conversation=conversation, limit=limit)
    return {"messages": messages, "source": source}

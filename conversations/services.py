"""Durable conversations and messages: the writes (reads are in ``conversations.selectors``).

Postgres is the record: a message is stored there first, in one transaction, or the
request fails (503 when the database is down) with nothing half-stored. After commit each
new message is appended to the conversation's Redis tail (``conversations.session``) and queued
for embedding; both are best-effort and repaired later (readers rebuild the tail, the
sweeper embeds what was missed).

Other apps act on new messages through ``after_messages_stored`` (retrieval embeds them):
this package imports nothing above ``memories``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from common.errors import PayloadTooLarge
from common.redaction import redact, redact_json
from conversations.models import Conversation, Message
from conversations.selectors import message_state
from conversations.session import session_append
from conversations.window import clean_window
from memories.models import Project
from memories.services import validate_metadata

# Hooks other apps register, called after commit with the new messages (retrieval queues
# them for embedding: ``retrieval.vectors.message_vectors.queue_for_embedding``).
after_messages_stored: list[Callable[[Sequence[Message]], None]] = []

# How much of the message before it a message keeps as its context (``Message.context``).
CONTEXT_CHARS = 300
# pg_advisory_xact_lock's namespace for "one conversation per session" (capture uses 4601).
SESSION_LOCK_NAMESPACE = 4602


@dataclass
class MessageDraft:
    role: str
    content: str
    extra: dict[str, Any] = field(default_factory=dict)
    correlation_id: str = ""
    said_at: datetime | None = None


def message_draft(raw: Mapping[str, Any]) -> MessageDraft:
    """A chat message as sent by an agent -> a draft: text content, everything else in ``extra``."""
    content = raw.get("content")
    extra = {k: v for k, v in raw.items() if k not in ("role", "content", "correlation_id", "timestamp")}
    if not isinstance(content, str):
        if content is not None:
            extra["content"] = content
        flat = clean_window([{"role": "user", "content": content}])
        content = flat[0]["content"] if flat else ""
    # Secrets never reach storage (common/redaction.py): not in the text, not in the extras.
    return MessageDraft(
        role=str(raw.get("role", "")),
        content=redact(content)[0],
        extra=redact_json(extra),
        correlation_id=str(raw.get("correlation_id") or ""),
        said_at=said_at(raw.get("timestamp")),
    )


def said_at(value: Any) -> datetime | None:
    """A message's ``timestamp`` (a datetime or ISO 8601 text) as an aware datetime; UTC when it
    names no zone. Anything else is None: the schema already refused malformed values."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def validate_messages(drafts: Sequence[MessageDraft]) -> None:
    """Raise PayloadTooLarge when there are too many messages or one is too long."""
    most = settings.MEMORYHUB_MAX_CAPTURE_MESSAGES
    if len(drafts) > most:
        raise PayloadTooLarge(f"{len(drafts)} messages in one request; the limit is {most}", code="too_many_messages")
    longest = settings.MEMORYHUB_MAX_MESSAGE_CHARS
    for index, draft in enumerate(drafts):
        if len(draft.content) > longest:
            raise PayloadTooLarge(
                f"messages[{index}] has {len(draft.content)} characters; the limit is {longest}",
                code="message_too_large",
            )
        validate_metadata(draft.extra)


def conversation_create(
    *, project: Project, user_id: str, session_id: str = "", title: str = "", metadata: dict[str, Any] | None = None
) -> Conversation:
    """Start a durable conversation for ``user_id``."""
    validate_metadata(metadata)
    with transaction.atomic(durable=True):
        return Conversation.objects.create(
            project=project, user_id=user_id, session_id=session_id, title=title, metadata=metadata or {}
        )


def messages_add(*, conversation: Conversation, drafts: Sequence[MessageDraft]) -> list[Message]:
    """Append messages (seq continues the conversation's); all or nothing."""
    validate_messages(drafts)
    with transaction.atomic(durable=True):
        return messages_append(conversation=conversation, drafts=drafts)


def messages_append(*, conversation: Conversation, drafts: Sequence[MessageDraft]) -> list[Message]:
    """The body of :func:`messages_add` for callers that own the transaction (capture).

    Locks the conversation row so concurrent appends get consecutive, unique seqs.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("messages_append must run inside a transaction")
    Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk").first()
    previous = Message.objects.filter(conversation=conversation).order_by("-seq").only("seq", "content").first()
    last = previous.seq if previous else 0
    before = [previous.content if previous else "", *(draft.content for draft in drafts)]
    messages = Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=last + offset,
            role=draft.role,
            content=draft.content,
            extra=draft.extra,
            correlation_id=draft.correlation_id,
            said_at=draft.said_at,
            context=before[offset - 1][:CONTEXT_CHARS],
        )
        for offset, draft in enumerate(drafts, start=1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    transaction.on_commit(lambda: _after_commit(conversation, messages))
    return messages


def session_messages_store(
    *, project: Project, user_id: str, session_id: str, drafts: Sequence[MessageDraft]
) -> list[str]:
    """Keep a captured window in its session's conversation, inside the caller's transaction:
    the messages it does not hold yet are appended; returns each draft's message id.

    Agents send overlapping windows turn after turn, so a message already among the
    conversation's last ``len(drafts)`` (same role and text) is the same message, not a new one.
    Without a session id, every capture is a conversation of its own.
    """
    conversation = _session_conversation(project=project, user_id=user_id, session_id=session_id)
    # A window overlaps the one before it at its start: only the newest messages can repeat.
    recent = Message.objects.filter(conversation=conversation).order_by("-seq")[: len(drafts)]
    known = {(m.role, m.content): str(m.pk) for m in reversed(list(recent.only("pk", "role", "content")))}
    new = []
    for draft in drafts:
        if (draft.role, draft.content) not in known:
            known[(draft.role, draft.content)] = ""  # a repeat inside the window is the same message
            new.append(draft)
    for message in messages_append(conversation=conversation, drafts=new) if new else []:
        known[(message.role, message.content)] = str(message.pk)
    return [known[(draft.role, draft.content)] for draft in drafts]


def _session_conversation(*, project: Project, user_id: str, session_id: str) -> Conversation:
    if session_id:
        # One conversation per session, even when two captures of it arrive at once.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                [SESSION_LOCK_NAMESPACE, f"{project.pk}:{user_id}:{session_id}"],
            )
        found = (
            Conversation.objects.filter(project=project, user_id=user_id, session_id=session_id)
            .order_by("created_at")
            .first()
        )
        if found is not None:
            return found
    return Conversation.objects.create(project=project, user_id=user_id, session_id=session_id)


def _after_commit(conversation: Conversation, messages: list[Message]) -> None:
    session_append(conversation_id=conversation.pk, messages=[message_state(m) for m in messages])
    for hook in after_messages_stored:
        hook(messages)

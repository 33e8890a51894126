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
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from conversations.selectors import message_state
from conversations.session import session_append
from conversations.window import clean_window
from memories.models import Conversation, Message, Project
from memories.services import validate_metadata
from memoryhub.errors import PayloadTooLarge
from memoryhub.redaction import redact, redact_json

# Hooks other apps register, called after commit with the new messages (retrieval queues
# them for embedding: ``retrieval.message_vectors.queue_for_embedding``).
after_messages_stored: list[Callable[[Sequence[Message]], None]] = []


@dataclass
class MessageDraft:
    role: str
    content: str
    extra: dict[str, Any] = field(default_factory=dict)
    correlation_id: str = ""


def message_draft(raw: Mapping[str, Any]) -> MessageDraft:
    """A chat message as sent by an agent -> a draft: text content, everything else in ``extra``."""
    content = raw.get("content")
    extra = {k: v for k, v in raw.items() if k not in ("role", "content", "correlation_id")}
    if not isinstance(content, str):
        if content is not None:
            extra["content"] = content
        flat = clean_window([{"role": "user", "content": content}])
        content = flat[0]["content"] if flat else ""
    # Secrets never reach storage (memoryhub/redaction.py): not in the text, not in the extras.
    return MessageDraft(
        role=str(raw.get("role", "")),
        content=redact(content)[0],
        extra=redact_json(extra),
        correlation_id=str(raw.get("correlation_id") or ""),
    )


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
    last = Message.objects.filter(conversation=conversation).aggregate(last=Max("seq"))["last"] or 0
    messages = Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=last + offset,
            role=draft.role,
            content=draft.content,
            extra=draft.extra,
            correlation_id=draft.correlation_id,
        )
        for offset, draft in enumerate(drafts, start=1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    transaction.on_commit(lambda: _after_commit(conversation, messages))
    return messages


def _after_commit(conversation: Conversation, messages: list[Message]) -> None:
    session_append(conversation_id=conversation.pk, messages=[message_state(m) for m in messages])
    for hook in after_messages_stored:
        hook(messages)

"""An import file's lines checked one by one (``integrations.transfer.import_lines``): each check
answers the row's fields ready to write, or raises ``Bad`` with the reason the line is rejected."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings

from memories import services
from memories.models import Kind, Project, Relationship, Scope, Status

MEMORY_TIMES = ("created_at", "updated_at", "expires_at", "deleted_at", "valid_from", "valid_until")


class Bad(Exception):
    pass


def need(item: dict[str, Any], name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    value = item.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        raise Bad(f"{name} must be {_kind_name(kind)}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", dict: "an object", list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in _as_tuple(kind))


def when(item: dict[str, Any], name: str, *, optional: bool = True) -> datetime | None:
    value = need(item, name, str, optional=optional)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as error:
        raise Bad(f"{name} is not an ISO 8601 time: {value!r}") from error
    if parsed.tzinfo is None:
        raise Bad(f"{name} has no time zone: {value!r}")
    return parsed


def choice(item: dict[str, Any], name: str, choices: Iterable[str]) -> str:
    value = need(item, name, str)
    allowed = list(choices)
    if value not in allowed:
        raise Bad(f"{name} {value!r} is not one of {allowed}")
    return str(value)


def check_memory(project: Project, item: dict[str, Any]) -> dict[str, Any]:
    source_id = need(item, "id", str)
    if not source_id or len(source_id) > 64:
        raise Bad("id must be a non-empty string of at most 64 characters")
    user_id = need(item, "user_id", str)
    if not user_id or len(user_id) > 255:
        raise Bad("user_id must be a non-empty string of at most 255 characters")
    content = need(item, "content", str)
    if not content.strip():
        raise Bad("content must not be empty")
    if len(content) > settings.MEMORYHUB_MAX_CONTENT_CHARS:
        raise Bad(f"content is {len(content)} characters; the limit is {settings.MEMORYHUB_MAX_CONTENT_CHARS}")
    importance = need(item, "importance", (int, float))
    if not 0 <= importance <= 1:
        raise Bad("importance must be between 0 and 1")
    metadata = need(item, "metadata", dict)
    category = need(item, "category", str)
    try:
        services.validate_metadata(metadata)
        services.validate_category(project=project, category=category)
    except Exception as error:  # the services' Invalid / PayloadTooLarge carry the reason
        raise Bad(getattr(error, "message", str(error))) from error
    version = need(item, "version", int)
    if version < 1:
        raise Bad("version must be at least 1")
    revisions = need(item, "revisions", list)
    checked_revisions = []
    for index, revision in enumerate(revisions):
        if not isinstance(revision, dict):
            raise Bad(f"revisions[{index}] must be an object")
        try:
            checked_revisions.append(
                {
                    "action": need(revision, "action", str),
                    "before": need(revision, "before", dict),
                    "after": need(revision, "after", dict),
                    "actor": need(revision, "actor", str),
                    "reason": need(revision, "reason", str),
                    "created_at": when(revision, "created_at", optional=False),
                }
            )
        except Bad as error:
            raise Bad(f"revisions[{index}]: {error}") from error
    source = item.get("source")
    if source is not None and not isinstance(source, dict):
        raise Bad("source must be an object or null")
    return {
        "source_id": source_id,
        "supersedes": need(item, "supersedes", str, optional=True),
        "revisions": checked_revisions,
        "fields": {
            "user_id": user_id,
            "scope": choice(item, "scope", Scope.values),
            "kind": choice(item, "kind", Kind.values),
            "category": category,
            "content": content,
            "content_hash": services.content_hash(content),
            "importance": float(importance),
            "metadata": metadata,
            "status": choice(item, "status", Status.values),
            "version": version,
            "source": source,
            "created_by": need(item, "created_by", str),
            **{name: when(item, name, optional=name not in ("created_at", "updated_at")) for name in MEMORY_TIMES},
        },
    }


def check_link(item: dict[str, Any]) -> dict[str, Any]:
    source, target = need(item, "from", str), need(item, "to", str)
    if source == target:
        raise Bad("a memory cannot link to itself")
    return {
        "from": source,
        "to": target,
        "relationship": choice(item, "relationship", Relationship.values),
        "created_by": need(item, "created_by", str),
        "created_at": when(item, "created_at", optional=False),
    }


def check_conversation(item: dict[str, Any]) -> dict[str, Any]:
    messages = []
    seqs = set()
    for index, message in enumerate(need(item, "messages", list)):
        if not isinstance(message, dict):
            raise Bad(f"messages[{index}] must be an object")
        try:
            seq = need(message, "seq", int)
            if seq in seqs:
                raise Bad(f"seq {seq} appears twice")
            seqs.add(seq)
            messages.append(
                {
                    "seq": seq,
                    "role": need(message, "role", str),
                    "content": need(message, "content", str),
                    "extra": need(message, "extra", dict),
                    "correlation_id": need(message, "correlation_id", str),
                    # Both absent from exports made before messages were searched as episodes.
                    "context": need(message, "context", str, optional=True) or "",
                    "said_at": when(message, "said_at"),
                    "created_at": when(message, "created_at", optional=False),
                }
            )
        except Bad as error:
            raise Bad(f"messages[{index}]: {error}") from error
    return {
        "source_id": need(item, "id", str),
        "user_id": need(item, "user_id", str),
        "session_id": need(item, "session_id", str),
        "title": need(item, "title", str),
        "metadata": need(item, "metadata", dict),
        "created_at": when(item, "created_at", optional=False),
        "updated_at": when(item, "updated_at", optional=False),
        "messages": messages,
    }

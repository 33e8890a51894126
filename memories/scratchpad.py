"""The scratchpad: one end user's key-value working memory inside a project.

Services (``scratchpad_put``, ``scratchpad_delete``) write; selectors
(``scratchpad_get``, ``scratchpad_list``, ``scratchpad_search``) read. Every one of them
is scoped to ``(project, user_id)``: another user's or another project's key is simply
not there (NotFound), exactly like a key that was never written.

Keys are 1-255 characters without control characters; ``/`` is allowed so agents can
namespace (``task/42/plan``); ``search`` is reserved. Values are any JSON up to 64 KiB serialized. There is no
TTL: an entry lives until it is overwritten or deleted.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import transaction
from django.db.models import Case, IntegerField, JSONField, Q, QuerySet, TextField, Value, When
from django.db.models.functions import Cast, Collate

from common.errors import Invalid, NotFound, PayloadTooLarge
from common.redaction import redact_json
from memories.models import Project, ScratchpadEntry

MAX_KEY_CHARS = 255
MAX_VALUE_BYTES = 64 * 1024
MAX_SEARCH_WORDS = 20
# The search endpoint's path segment: /scratchpad/search can never reach a key of that name.
RESERVED_KEYS = frozenset({"search"})
# C0, DEL and C1: invisible in logs and UIs, and NUL is not storable in Postgres text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_key(key: str) -> None:
    """Raise Invalid unless ``key`` is a usable scratchpad key."""
    if not 1 <= len(key) <= MAX_KEY_CHARS:
        raise Invalid(f"key: must be 1-{MAX_KEY_CHARS} characters", code="invalid_key")
    if _CONTROL.search(key):
        raise Invalid("key: must not contain control characters", code="invalid_key")
    if key in RESERVED_KEYS:
        raise Invalid(f"key: {key!r} is reserved", code="invalid_key")


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def check_value(value: Any) -> None:
    """Raise PayloadTooLarge above 64 KiB of compact UTF-8 JSON, Invalid for what jsonb refuses."""
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_VALUE_BYTES:
        raise PayloadTooLarge(
            f"value: {size} bytes serialized, the limit is {MAX_VALUE_BYTES}",
            code="value_too_large",
            details={"size": size, "limit": MAX_VALUE_BYTES},
        )
    # jsonb rejects \u0000; without this check it would surface as a database error.
    if _has_nul(value):
        raise Invalid("value: strings must not contain NUL (\\u0000)", code="invalid_value")


def _entries(*, project: Project, user_id: str) -> QuerySet[ScratchpadEntry]:
    """The isolation rule, once: one project, one end user."""
    return ScratchpadEntry.objects.filter(project=project, user_id=user_id)


def scratchpad_put(*, project: Project, user_id: str, key: str, value: Any) -> ScratchpadEntry:
    """Create or overwrite ``key`` for ``user_id``; last write wins."""
    check_key(key)
    check_value(value)
    value = redact_json(value)  # secrets never reach storage (common/redaction.py)
    # A bare None would be SQL NULL (refused by the column); JSON null needs saying so.
    stored = Value(None, JSONField()) if value is None else value
    with transaction.atomic(durable=True):
        # update_or_create locks an existing row and retries the get after a unique
        # violation, so two concurrent first writes of a key end as one row, not a 500.
        entry, _ = ScratchpadEntry.objects.update_or_create(
            project=project, user_id=user_id, key=key, defaults={"value": stored}
        )
    entry.value = value
    return entry


def scratchpad_delete(*, project: Project, user_id: str, key: str) -> None:
    """Delete ``key`` for ``user_id``; NotFound if it is not there."""
    check_key(key)
    with transaction.atomic(durable=True):
        deleted, _ = _entries(project=project, user_id=user_id).filter(key=key).delete()
    if not deleted:
        raise NotFound(f"no scratchpad key {key!r}")


def scratchpad_get(*, project: Project, user_id: str, key: str) -> ScratchpadEntry:
    """One entry of ``user_id``; NotFound if it is not there."""
    check_key(key)
    entry = _entries(project=project, user_id=user_id).filter(key=key).first()
    if entry is None:
        raise NotFound(f"no scratchpad key {key!r}")
    return entry


def _by_key() -> Collate:
    # Code-point order ("task/10" after "task/1/…"), the same as Python's sorted(),
    # whatever the database's locale collation would say about punctuation.
    return Collate("key", "C")


def scratchpad_list(*, project: Project, user_id: str, prefix: str = "", limit: int = 100) -> list[ScratchpadEntry]:
    """The user's entries whose key starts with ``prefix`` (literally), sorted by key."""
    # startswith escapes %, _ and \ for LIKE, so a prefix is never a pattern.
    entries = _entries(project=project, user_id=user_id).filter(key__startswith=prefix)
    return list(entries.order_by(_by_key())[:limit])


def _words(q: str) -> list[str]:
    words = list(dict.fromkeys(q.lower().split()))
    if not words:
        raise Invalid("q: must contain at least one word", code="invalid_query")
    if len(words) > MAX_SEARCH_WORDS:
        raise Invalid(f"q: at most {MAX_SEARCH_WORDS} words", code="invalid_query")
    return words


def scratchpad_search(*, project: Project, user_id: str, q: str, limit: int = 20) -> list[ScratchpadEntry]:
    """The user's entries whose key or value contains every word of ``q``, case-insensitively.

    The value is matched as its JSON text (``value::text``), so object keys match too.
    Ranking: entries with more of the words in their key first (the key names what the
    entry is about), then the most recently updated, then by key.
    """
    words = _words(q)
    entries = _entries(project=project, user_id=user_id).annotate(value_text=Cast("value", TextField()))
    for word in words:
        entries = entries.filter(Q(key__icontains=word) | Q(value_text__icontains=word))
    key_hits = sum(
        (
            Case(When(key__icontains=word, then=Value(1)), default=Value(0), output_field=IntegerField())
            for word in words
        ),
        start=Value(0),
    )
    entries = entries.annotate(key_hits=key_hits).order_by("-key_hits", "-updated_at", _by_key())
    return list(entries[:limit])

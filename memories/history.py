"""Every change to a memory leaves a revision, and what other apps registered runs after it.

The memory domain's write modules (``services``, ``lifecycle``, ``review``, ``consolidating``,
``edges``) all record through :func:`record_revision`, which is why the ``after_user_change`` hook
fires from here: no write can forget it. The hooks live here, as plain callables, so the memory
domain imports nothing of the apps above it (retrieval registers embedding, profiles a rebuild).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction

from memories.models import Memory, MemoryRevision

# Fields a revision snapshots.
SNAPSHOT_FIELDS = ("content", "kind", "category", "scope", "importance", "metadata", "status", "version", "expires_at")

# Hooks other apps register (retrieval embeds; capture queues tasks). Keeping them as
# plain callables keeps this module free of imports from those apps.
after_content_change: list[Callable[[Sequence[Memory], bool], None]] = []
# Called after the commit of any change to a memory, with (project id, user id, scope): the
# profiles app rebuilds what rests on that user's (or, for a shared memory, the project's) memories.
after_user_change: list[Callable[[int, str, str], None]] = []


def snapshot(memory: Memory) -> dict[str, Any]:
    """The JSON-safe state of a memory that revisions record."""
    state = {name: getattr(memory, name) for name in SNAPSHOT_FIELDS}
    state["expires_at"] = memory.expires_at.isoformat() if memory.expires_at else None
    return state


def record_revision(memory: Memory, *, action: str, before: dict[str, Any], actor: str, reason: str = "") -> None:
    """Write ``memory``'s revision (``before`` and its state now) inside the caller's transaction."""
    MemoryRevision.objects.create(
        memory=memory, action=action, before=before, after=snapshot(memory), actor=actor, reason=reason
    )
    user_changed(memory.project_id, memory.user_id, memory.scope)


def user_changed(project_id: int, user_id: str, scope: str) -> None:
    """Run the ``after_user_change`` hooks once the surrounding transaction commits (every change
    writes a revision, so every change comes through here)."""

    def notify() -> None:
        for hook in after_user_change:
            hook(project_id, user_id, scope)

    if after_user_change:
        transaction.on_commit(notify)


def notify_content_change(memories: Sequence[Memory], *, inline: bool) -> None:
    """Run the ``after_content_change`` hooks (retrieval embeds the memories: at once when ``inline``,
    else in the background); called after the commit, so the hooks read committed rows."""
    for hook in after_content_change:
        hook(memories, inline)

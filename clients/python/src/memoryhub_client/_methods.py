"""Every API method of both clients, written once. ``MemoryHub`` and ``AsyncMemoryHub`` inherit
them: each builder below prepares its request from the operation table, and ``endpoint`` makes
it a method that sends it (``_endpoint``). Every method is keyword-only and maps to one row of
``operations.OPERATIONS``; an argument left at None is not sent, so the server's default applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memoryhub_client._core import Call, prepare
from memoryhub_client._endpoint import endpoint
from memoryhub_client.models import (
    BulkResult,
    CaptureJob,
    Consolidation,
    Erasure,
    Health,
    History,
    ImportResult,
    JobAccepted,
    Link,
    Memory,
    MemoryPage,
    MemoryWrite,
    Profile,
    ProfileVersions,
    QueryMemoryResult,
    RetrieveResult,
    ScratchpadEntry,
    ScratchpadList,
)

Links = Sequence[Link | dict[str, str]] | None


class Methods:
    """The API methods both clients share (the pagination and polling helpers, which iterate and
    sleep each client's own way, are on the clients)."""

    # -- memories ---------------------------------------------------------------------------

    @endpoint
    def health(self) -> Call[Health]:
        """The server's dependencies (no key needed, but it is sent)."""
        return prepare("health", locals())

    @endpoint
    def create_memory(
        self,
        *,
        user_id: str,
        content: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        supersedes: str | None = None,
        related: Links = None,
        idempotency_key: str | None = None,
    ) -> Call[MemoryWrite]:
        """Create one memory; ``related`` links it to others (``Link(id, relationship)``)."""
        return prepare("create_memory", locals())

    @endpoint
    def bulk_create_memories(
        self, *, memories: Sequence[dict[str, Any]], idempotency_key: str | None = None
    ) -> Call[BulkResult]:
        """Create up to 1,000 memories in one request; they are embedded in the background."""
        return prepare("bulk_create_memories", locals())

    @endpoint
    def get_memory(self, *, memory_id: str, user_id: str) -> Call[Memory]:
        """One memory the user can see (``NotFound`` otherwise)."""
        return prepare("get_memory", locals())

    @endpoint
    def update_memory(
        self,
        *,
        memory_id: str,
        user_id: str,
        content: str | None = None,
        kind: str | None = None,
        category: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        reason: str | None = None,
    ) -> Call[Memory]:
        """Edit a memory in place; the server records a revision."""
        return prepare("update_memory", locals())

    @endpoint
    def delete_memory(self, *, memory_id: str, user_id: str) -> Call[None]:
        """Soft-delete a memory."""
        return prepare("delete_memory", locals())

    @endpoint
    def memory_history(self, *, memory_id: str, user_id: str) -> Call[History]:
        """Every revision of a memory and its supersede chain."""
        return prepare("memory_history", locals())

    @endpoint
    def supersede_memory(
        self,
        *,
        memory_id: str,
        user_id: str,
        content: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        related: Links = None,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[MemoryWrite]:
        """Replace a memory with a new version; the old one becomes ``superseded``."""
        return prepare("supersede_memory", locals())

    @endpoint
    def list_memories(
        self,
        *,
        user_id: str,
        kind: str | None = None,
        category: str | None = None,
        scope: str | None = None,
        status: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[MemoryPage]:
        """One page of a user's memories; ``iter_memories`` walks them all."""
        return prepare("list_memories", locals())

    # -- retrieval and tools ----------------------------------------------------------------

    @endpoint
    def retrieve(
        self,
        *,
        user_id: str,
        query: str | None = None,
        messages: Sequence[dict[str, Any]] | None = None,
        turn_id: str | None = None,
        limit: int | None = None,
        token_budget: int | None = None,
        min_score: float | None = None,
        kinds: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        hyde: bool | None = None,
        hop_depth: int | None = None,
        include_superseded: bool | None = None,
        judge: bool | None = None,
        episodes: bool | None = None,
        profile: bool | None = None,
    ) -> Call[RetrieveResult]:
        """The memories relevant to ``query`` (or the conversation ``messages``) and the
        injection text for a system prompt."""
        return prepare("retrieve", locals())

    @endpoint
    def tools(self) -> Call[list[dict[str, Any]]]:
        """The OpenAI function-tool schemas an agent framework can register as they are."""
        return prepare("tools", locals())

    @endpoint
    def query_memory(
        self,
        *,
        user_id: str,
        query: str,
        types: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Call[QueryMemoryResult]:
        """The ``query_memory`` tool: retrieval in the compact shape a tool call returns."""
        return prepare("query_memory", locals())

    # -- capture ----------------------------------------------------------------------------

    @endpoint
    def capture(
        self,
        *,
        user_id: str,
        messages: Sequence[dict[str, Any]],
        trigger: str,
        session_id: str | None = None,
        conversation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[JobAccepted]:
        """Hand a conversation to the server (``trigger`` ``"turn"`` or ``"compaction"``); it
        extracts memories in the background."""
        return prepare("capture", locals())

    @endpoint
    def capture_job(self, *, job_id: str, user_id: str) -> Call[CaptureJob]:
        """A capture job's state."""
        return prepare("capture_job", locals())

    # -- scratchpad -------------------------------------------------------------------------

    @endpoint
    def put_scratchpad(self, *, key: str, user_id: str, value: Any) -> Call[ScratchpadEntry]:
        """Set one key of the user's scratchpad (any JSON value)."""
        return prepare("put_scratchpad", locals())

    @endpoint
    def get_scratchpad(self, *, key: str, user_id: str) -> Call[ScratchpadEntry]:
        """One key of the user's scratchpad (``NotFound`` when unset)."""
        return prepare("get_scratchpad", locals())

    @endpoint
    def delete_scratchpad(self, *, key: str, user_id: str) -> Call[None]:
        """Remove one key of the user's scratchpad."""
        return prepare("delete_scratchpad", locals())

    @endpoint
    def list_scratchpad(
        self, *, user_id: str, prefix: str | None = None, limit: int | None = None
    ) -> Call[ScratchpadList]:
        """The user's scratchpad keys starting with ``prefix``."""
        return prepare("list_scratchpad", locals())

    @endpoint
    def search_scratchpad(self, *, user_id: str, q: str, limit: int | None = None) -> Call[ScratchpadList]:
        """The user's scratchpad entries whose key or value contains ``q``."""
        return prepare("search_scratchpad", locals())

    # -- the project's data -----------------------------------------------------------------

    @endpoint
    def export(self, *, user_id: str | None = None, conversations: bool | None = None) -> Call[str]:
        """The project (or one user's part of it) as JSON lines (docs/api.md)."""
        return prepare("export", locals())

    @endpoint
    def import_jsonl(self, *, text: str, idempotency_key: str | None = None) -> Call[ImportResult]:
        """Import an export file's text; when any line is rejected nothing is imported and
        ``ValidationError`` (code ``import_rejected``) lists each line's reason in ``details``."""
        return prepare("import_jsonl", locals(), content=text)

    @endpoint
    def get_profile(self, *, user_id: str) -> Call[Profile]:
        """The user's profile (``NotFound`` before the first is built)."""
        return prepare("get_profile", locals())

    @endpoint
    def rebuild_profile(self, *, user_id: str) -> Call[Profile]:
        """Rebuild the user's profile from their active memories now, and answer it."""
        return prepare("rebuild_profile", locals())

    @endpoint
    def edit_profile(
        self,
        *,
        user_id: str,
        pinned: list[str] | None = None,
        hidden_memory_ids: list[str] | None = None,
        reason: str | None = None,
    ) -> Call[Profile]:
        """Pin facts written by hand (always first) and leave memories out; a field left out keeps
        its value. Every edit is a new version, and both survive rebuilds until the next edit."""
        return prepare("edit_profile", locals())

    @endpoint
    def profile_versions(self, *, user_id: str, limit: int | None = None) -> Call[ProfileVersions]:
        """The profile's versions, newest first."""
        return prepare("profile_versions", locals())

    @endpoint
    def erase_user(self, *, user_id: str) -> Call[Erasure]:
        """Erase one end user of the project, irreversibly; answers what was removed."""
        return prepare("erase_user", locals())

    # -- consolidation ----------------------------------------------------------------------

    @endpoint
    def consolidate(self, *, user_id: str, idempotency_key: str | None = None) -> Call[JobAccepted]:
        """Queue a consolidation of the user's memories (near-duplicates merged, unlinked changes
        of mind superseded, under the project's capture policy); the run already waiting answers
        when there is one."""
        return prepare("consolidate", locals())

    @endpoint
    def consolidation(self, *, job_id: str, user_id: str) -> Call[Consolidation]:
        """A consolidation's state: status, counts per action, and what it did or proposed."""
        return prepare("consolidation", locals())

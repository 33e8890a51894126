"""Every API operation the client calls, declared once: method, path, the query and body
fields it sends, and the model it decodes. Both clients build their requests from this table
only, and ``contract.check_schema`` compares it with the server's OpenAPI schema, so what
the client sends and expects cannot drift from the API unnoticed.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from memoryhub_client import models

JSON = "application/json"
NDJSON = "application/x-ndjson"


@dataclass(frozen=True)
class Operation:
    """One API operation. ``response`` is a model, ``"json"`` (raw), ``"text"`` or None (204)."""

    method: str
    path: str
    status: int = 200
    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()
    response: Any = None
    content_type: str = JSON
    # Path parameters sent unescaped: a scratchpad key may contain "/" (the route takes a path).
    raw_path: tuple[str, ...] = ()
    # A write the server deduplicates by ``Idempotency-Key``: the client sends one per call, the
    # same on every retry, so a retry after a lost answer cannot write twice.
    creates: bool = False

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.path) if name)


_MEMORY_FIELDS = ("user_id", "content", "kind", "category", "importance", "metadata", "expires_at", "related")

OPERATIONS: dict[str, Operation] = {
    "health": Operation("GET", "/health", response=models.Health),
    "create_memory": Operation(
        "POST",
        "/memories",
        201,
        body=(*_MEMORY_FIELDS, "scope", "supersedes"),
        response=models.MemoryWrite,
        creates=True,
    ),
    "bulk_create_memories": Operation(
        "POST", "/memories/bulk", 201, body=("memories",), response=models.BulkResult, creates=True
    ),
    "list_memories": Operation(
        "GET",
        "/memories",
        query=("user_id", "kind", "category", "scope", "status", "q", "limit", "cursor"),
        response=models.MemoryPage,
    ),
    "get_memory": Operation("GET", "/memories/{memory_id}", query=("user_id",), response=models.Memory),
    "update_memory": Operation(
        "PATCH",
        "/memories/{memory_id}",
        body=("user_id", "content", "kind", "category", "importance", "metadata", "expires_at", "reason"),
        response=models.Memory,
    ),
    "delete_memory": Operation("DELETE", "/memories/{memory_id}", 204, query=("user_id",)),
    "memory_history": Operation("GET", "/memories/{memory_id}/history", query=("user_id",), response=models.History),
    "supersede_memory": Operation(
        "POST",
        "/memories/{memory_id}/supersede",
        201,
        body=(*_MEMORY_FIELDS, "scope", "reason"),
        response=models.MemoryWrite,
        creates=True,
    ),
    "retrieve": Operation(
        "POST",
        "/retrieve",
        body=(
            "user_id",
            "query",
            "messages",
            "turn_id",
            "limit",
            "token_budget",
            "min_score",
            "kinds",
            "categories",
            "hyde",
            "hop_depth",
            "include_superseded",
            "judge",
            "episodes",
            "profile",
        ),
        response=models.RetrieveResult,
    ),
    "tools": Operation("GET", "/tools", response="json"),
    "query_memory": Operation(
        "POST",
        "/tools/query_memory",
        body=("user_id", "query", "types", "categories", "limit"),
        response=models.QueryMemoryResult,
    ),
    "capture": Operation(
        "POST",
        "/capture",
        202,
        body=("user_id", "session_id", "trigger", "messages", "conversation_id"),
        response=models.JobAccepted,
        creates=True,
    ),
    "capture_job": Operation("GET", "/capture/{job_id}", query=("user_id",), response=models.CaptureJob),
    "list_scratchpad": Operation(
        "GET", "/scratchpad", query=("user_id", "prefix", "limit"), response=models.ScratchpadList
    ),
    "search_scratchpad": Operation(
        "GET", "/scratchpad/search", query=("user_id", "q", "limit"), response=models.ScratchpadList
    ),
    "put_scratchpad": Operation(
        "PUT", "/scratchpad/{key}", body=("user_id", "value"), response=models.ScratchpadEntry, raw_path=("key",)
    ),
    "get_scratchpad": Operation(
        "GET", "/scratchpad/{key}", query=("user_id",), response=models.ScratchpadEntry, raw_path=("key",)
    ),
    "delete_scratchpad": Operation("DELETE", "/scratchpad/{key}", 204, query=("user_id",), raw_path=("key",)),
    "export": Operation("GET", "/export", query=("user_id", "conversations"), response="text"),
    "import_jsonl": Operation("POST", "/import", response=models.ImportResult, content_type=NDJSON, creates=True),
    "erase_user": Operation("DELETE", "/users/{user_id}", response=models.Erasure),
    "consolidate": Operation("POST", "/users/{user_id}/consolidate", 202, response=models.JobAccepted, creates=True),
    "consolidation": Operation("GET", "/consolidations/{job_id}", query=("user_id",), response=models.Consolidation),
    "get_profile": Operation("GET", "/users/{user_id}/profile", response=models.Profile),
    "rebuild_profile": Operation("POST", "/users/{user_id}/profile/rebuild", response=models.Profile),
    "edit_profile": Operation(
        "PATCH", "/users/{user_id}/profile", body=("pinned", "hidden_memory_ids", "reason"), response=models.Profile
    ),
    "profile_versions": Operation(
        "GET", "/users/{user_id}/profile/versions", query=("limit",), response=models.ProfileVersions
    ),
}

# Operations of the API the client leaves out on purpose, with why. The contract check fails
# on any operation of the schema that is neither here nor in OPERATIONS (a new endpoint).
NOT_COVERED: dict[tuple[str, str], str] = {
    ("POST", "/tools/add_memory"): "the tool-call shape of create_memory, for frameworks that replay tool calls",
    ("POST", "/observations"): "agent-step observations: not part of an agent's memory loop yet",
    ("POST", "/conversations"): "durable conversations: capture(conversation_id=...) links to them",
    ("POST", "/conversations/{conversation_id}/messages"): "durable conversations (as above)",
    ("GET", "/conversations/{conversation_id}"): "durable conversations (as above)",
    ("GET", "/conversations/{conversation_id}/recent"): "durable conversations (as above)",
    ("PUT", "/scratchpad/search"): "a reserved key that only answers an error",
    ("DELETE", "/scratchpad/search"): "a reserved key that only answers an error",
}

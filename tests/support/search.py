"""Helpers for tests of the search's statements: memories stored with their vectors, and the
statements a block of code sent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from memories import services
from memories.models import Memory, Project
from retrieval.vectors.memory_vectors import embed_memories


def stored(project: Project, user_id: str, contents: list[str], scope: str = "user") -> list[Memory]:
    """``contents`` as ``user_id``'s memories, each embedded with the project's model."""
    drafts = [services.MemoryDraft(user_id=user_id, content=content, scope=scope) for content in contents]
    memories = services.memory_bulk_create(project=project, drafts=drafts, actor="system:test")
    embed_memories(memories)
    return memories


@contextmanager
def statements_containing(marker: str) -> Iterator[list[tuple[str, Any]]]:
    """The SQL and parameters of each statement this thread's connection runs inside the block
    whose text contains ``marker``, in order."""
    seen: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if marker in sql:
            seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield seen

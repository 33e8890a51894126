"""Helpers for consolidation's tests: memories written and embedded with the real local model,
and a run done at once (what the worker does with a queued run)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from consolidation import services, vectors
from consolidation.models import ConsolidationRun
from memories import services as memory_services
from memories.models import Memory, Project


@pytest.fixture(autouse=True)
def no_held_vectors() -> Iterator[None]:
    """Each test reads its users' vectors afresh (a process keeps them between runs)."""
    vectors.forget_held()
    yield
    vectors.forget_held()


def remember(project: Project, content: str, *, user_id: str = "alice", **fields: Any) -> Memory:
    """A memory written through the services and embedded inline (so a run finds its vector)."""
    draft = memory_services.MemoryDraft(user_id=user_id, content=content, **fields)
    return memory_services.memory_create(project=project, draft=draft, actor="system:test")


def consolidate(project: Project, user_id: str = "alice") -> ConsolidationRun:
    """Queue a run for ``user_id`` and run it here, as a worker would."""
    run = services.consolidation_submit(
        project=project, user_id=user_id, trigger="api", actor="system:test", queue=False
    )
    assert services.consolidation_run(run_id=str(run.pk)) == "done"
    return ConsolidationRun.objects.get(pk=run.pk)


def fresh(memory: Memory) -> Memory:
    return Memory.objects.get(pk=memory.pk)

"""The hybrid search's settings last for its own statements only, inside a transaction or not.

Each of its statements goes after SETTINGS_SQL in one pipelined round trip (retrieval/search.py,
memoryhub/prepared.py): outside a transaction the pipeline's implicit transaction ends them; inside
one, a rolled-back savepoint does.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from memories import services
from memories.models import Project
from memoryhub import row_security
from retrieval.embedders import get_embedder
from retrieval.memory_vectors import active_model
from retrieval.search import SearchParams, hybrid_search

SESSION = ("statement_timeout", "hnsw.ef_search", "hnsw.iterative_scan")


def _session_state() -> tuple[str, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('role'), "
            + ", ".join(f"current_setting('{name}', true)" for name in SESSION)
            + ", current_setting('memoryhub.project_id', true)"
        )
        return tuple(cursor.fetchone())


def _memory(project: Project) -> str:
    draft = services.MemoryDraft(user_id="alice", content="Alice keeps two beehives behind the barn.")
    return str(services.memory_create(project=project, draft=draft, actor="test", embed_inline=True).pk)


def _search(project: Project, *, timeout_ms: int | None = 1500) -> list[str]:
    query = "Who keeps bees?"
    params = SearchParams(
        project_id=project.pk,
        user_id="alice",
        query=query,
        model=active_model(project),
        vectors=get_embedder().embed([query]),
    )
    return [c.memory_id for c in hybrid_search(params, timeout_ms=timeout_ms).candidates]


def _as_tenant(project: Project) -> None:
    assert row_security.enter(project.pk), "the test database has the tenant role"


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_settings_end_with_each_statement(project):
    memory_id = _memory(project)
    _as_tenant(project)
    try:
        before = _session_state()
        assert before[0] == row_security.ROLE
        assert _search(project) == [memory_id]  # found under the settings (the tenant role left) ...
        assert _session_state() == before  # ... which ended with the statements
        assert not connection.in_atomic_block
    finally:
        row_security.leave()


def test_inside_a_transaction_the_settings_are_rolled_back_with_the_search(project):
    memory_id = _memory(project)
    _as_tenant(project)
    try:
        before = _session_state()
        assert _search(project) == [memory_id]
        assert _session_state() == before
    finally:
        row_security.leave()


@pytest.mark.django_db(transaction=True)
def test_a_search_that_times_out_leaves_the_connection_as_it_was(project, monkeypatch):
    memory_id = _memory(project)
    _as_tenant(project)
    try:
        before = _session_state()
        with monkeypatch.context() as patch:  # a full-text statement that cannot finish in 50 ms
            patch.setattr("retrieval.search.KEYWORD_SQL", "SELECT pg_sleep(0.5)")
            with pytest.raises(DatabaseError, match="statement timeout"):
                _search(project, timeout_ms=50)
        assert _session_state() == before  # still the tenant, the session's own timeout
        assert _search(project) == [memory_id]  # and the connection searches on
    finally:
        row_security.leave()


def test_inside_a_transaction_a_failed_search_leaves_the_outer_transaction_to_its_owner(project, monkeypatch):
    _memory(project)
    with transaction.atomic():
        monkeypatch.setattr("retrieval.search.HNSW_EF_SEARCH", "not a number")
        with pytest.raises(DatabaseError):
            _search(project)
        monkeypatch.undo()
        assert _search(project)  # the savepoint was rolled back: the outer transaction goes on

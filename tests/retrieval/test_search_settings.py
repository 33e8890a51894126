"""The hybrid search's settings last for its own statements only, inside a transaction or not.

Each of its statements goes after SETTINGS_SQL in one pipelined round trip (retrieval/ranking/search.py,
common/prepared.py): outside a transaction the pipeline's implicit transaction ends them; inside
one, a rolled-back savepoint does. The query vectors are computed while Postgres runs the full-text
statement.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from common import row_security
from memories import services
from memories.models import Project
from retrieval.embedding.embedders import get_embedder
from retrieval.ranking.search import SearchParams, hybrid_search
from retrieval.ranking.search_sql import KEYWORD_SQL
from retrieval.vectors.memory_vectors import active_model
from tests.support.celery_worker import database_url_for_tests, wait_until

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
            patch.setattr("retrieval.ranking.search.KEYWORD_SQL", "SELECT pg_sleep(0.5)")
            with pytest.raises(DatabaseError, match="statement timeout"):
                _search(project, timeout_ms=50)
        assert _session_state() == before  # still the tenant, the session's own timeout
        assert _search(project) == [memory_id]  # and the connection searches on
    finally:
        row_security.leave()


def test_inside_a_transaction_a_failed_search_leaves_the_outer_transaction_to_its_owner(project, monkeypatch):
    _memory(project)
    with transaction.atomic():
        monkeypatch.setattr("retrieval.ranking.search.HNSW_EF_SEARCH", "not a number")
        with pytest.raises(DatabaseError):
            _search(project)
        monkeypatch.undo()
        assert _search(project)  # the savepoint was rolled back: the outer transaction goes on


def test_the_query_vectors_are_computed_while_postgres_runs_the_full_text_statement(project, monkeypatch):
    """The search sends its full-text statement, then asks for the query vectors, then reads the
    statement's rows. Here the statement waits for a lock another connection holds, and only the
    vectors' computation lets it go: a search that asked for them before sending or after reading
    would find the lock still held (and the statement would time out)."""
    memory_id = _memory(project)
    query = "Who keeps bees?"
    with psycopg.connect(database_url_for_tests(), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(4242)")
        # The real statement, which cannot finish before the lock is taken.
        monkeypatch.setattr(
            "retrieval.ranking.search.KEYWORD_SQL",
            f"WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(4242)) SELECT k.* FROM lock, ({KEYWORD_SQL}) k",
        )
        waited: list[bool] = []

        def lock_awaited() -> bool:
            query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            return holder.execute(query).fetchone() == (1,)

        def vectors() -> np.ndarray:
            waited.append(wait_until(lock_awaited, timeout=5, interval=0.01))
            holder.execute("SELECT pg_advisory_unlock(4242)")
            return get_embedder().embed([query])

        params = SearchParams(
            project_id=project.pk, user_id="alice", query=query, model=active_model(project), vectors=None
        )
        found = hybrid_search(params, timeout_ms=5000, pending_vectors=vectors).candidates
    assert waited == [True]  # asked for once, while the full-text statement waited for the lock
    assert [(c.memory_id, c.matched_by) for c in found] == [(memory_id, ["keyword", "vector"])]

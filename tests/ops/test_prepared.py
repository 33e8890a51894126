"""The retrieve path's statements are prepared once per connection (common/prepared.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from common import prepared
from memories import services


def _prepared_statements() -> list[tuple[str, int]]:
    """This connection's prepared statements: their text and how often each was run."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return [(statement.strip(), runs) for statement, runs in cursor.fetchall()]


def _retrieve(api: Any, query: str) -> list[str]:
    response = api.post("/retrieve", {"user_id": "alice", "query": query, "hyde": False, "min_score": 0})
    assert response.status_code == 200, response.content
    return [memory["id"] for memory in response.json()["memories"]]


def _runs(statements: list[tuple[str, int]], start: str) -> int:
    return sum(runs for text, runs in statements if text.startswith(start))


@pytest.fixture
def memories(api: Any) -> list[str]:
    texts = ("Alice keeps two beehives behind the barn.", "Alice deploys with Kubernetes on Fridays.")
    return [
        str(
            services.memory_create(
                project=api.project,
                draft=services.MemoryDraft(user_id="alice", content=text),
                actor="system:test",
                embed_inline=True,
            ).pk
        )
        for text in texts
    ]


@pytest.mark.django_db(transaction=True)
def test_each_statement_of_a_retrieve_is_prepared_once_and_run_again(api, memories):
    questions = [f"Who keeps bees, question {n}?" for n in range(7)]
    answers = [_retrieve(api, question) for question in questions]
    assert all(memories[0] in answer for answer in answers)
    statements = _prepared_statements()
    # Prepared once and run by every retrieve: the key lookup, the search's settings, the full-text
    # statement, the fusion statement (two texts: a process's first search reads the vectors in
    # Postgres, later ones pick them from its own copy) and the load of the returned memories.
    assert _runs(statements, "SELECT k.") == 7
    assert _runs(statements, "SELECT current_setting('role')") == 14
    assert _runs(statements, "WITH query_lexemes AS") == 7
    assert _runs(statements, "WITH keyword_hits AS") == 7
    assert _runs(statements, "SELECT m.id, m.project_id") == 7


@pytest.mark.django_db(transaction=True)
def test_switched_off_nothing_is_prepared_and_the_answers_are_the_same(api, memories, settings):
    prepared_answer = _retrieve(api, "Who deploys on Fridays?")
    connection.close()  # a new connection, without the statements prepared so far
    settings.MEMORYHUB_PREPARED_STATEMENTS = False
    assert _retrieve(api, "Who deploys on Fridays?") == prepared_answer
    assert prepared_answer[0] == memories[1]
    assert _prepared_statements() == []


def test_the_debugging_cursor_logs_the_statement_as_written(db, django_assert_num_queries):
    with django_assert_num_queries(1) as captured, prepared.cursor() as cursor:
        cursor.execute("SELECT %(n)s::int + 1", {"n": 41})
        assert cursor.fetchone() == (42,)
    assert captured.captured_queries[0]["sql"] == "SELECT %(n)s::int + 1"


@pytest.mark.django_db(transaction=True)
def test_the_statements_of_one_pipeline_share_a_transaction():
    with prepared.cursor() as first, prepared.cursor() as second, prepared.pipeline():
        first.execute("SELECT set_config('memoryhub.probe', %s, true)", ["set"])
        second.execute("SELECT current_setting('memoryhub.probe', true)")
        assert second.fetchone() == ("set",)
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(current_setting('memoryhub.probe', true), '')")
        assert cursor.fetchone() == ("",)  # transaction-local: gone with the pipeline's transaction

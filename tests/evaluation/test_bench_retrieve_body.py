"""bench_retrieve's requests: a plain question is one query vector, the "window" scenario's two."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from evaluation.management.commands.bench_retrieve import retrieve_body
from memories import services
from retrieval.memory_vectors import embed_memories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("earlier", "vectors"), [(None, 1), ("Who plays jazz at the office?", 2)])
def test_a_question_in_a_window_is_searched_with_the_question_and_the_window(api, earlier, vectors):
    embed_memories(
        services.memory_bulk_create(
            project=api.project,
            drafts=[services.MemoryDraft(user_id="user-0", content="Dana plays the violin on Sundays.")],
            actor="system:test",
        )
    )
    sent: list[Any] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "nearest_rows" in sql:
            sent.append(params)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        response = api.post(
            "/retrieve", retrieve_body("When does Dana play the violin?", hyde=False, user=0, earlier=earlier)
        )
    assert response.status_code == 200, response.content
    assert [params["query_vectors"] for params in sent] == [vectors]
    assert response.json()["memories"][0]["content"] == "Dana plays the violin on Sundays."

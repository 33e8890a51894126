"""bench_retrieve's requests: a plain question is one query vector, the "window" scenario's two."""

from __future__ import annotations

import pytest

from evaluation.management.commands.bench_retrieve import retrieve_body
from tests.support.search import statements_containing, stored

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("earlier", "vectors"), [(None, 1), ("Who plays jazz at the office?", 2)])
def test_a_question_in_a_window_is_searched_with_the_question_and_the_window(api, earlier, vectors):
    stored(api.project, "user-0", ["Dana plays the violin on Sundays."])
    with statements_containing("nearest_rows") as sent:
        response = api.post(
            "/retrieve", retrieve_body("When does Dana play the violin?", hyde=False, user=0, earlier=earlier)
        )
    assert response.status_code == 200, response.content
    assert [params["query_vectors"] for _, params in sent] == [vectors]
    assert response.json()["memories"][0]["content"] == "Dana plays the violin on Sundays."

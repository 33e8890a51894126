"""bench_retrieve's requests: a plain question is one query vector, the "window" scenario's two."""

from __future__ import annotations

import pytest

from evaluation.management.commands.bench_retrieve import USERS, retrieve_body, user_for
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


@pytest.mark.django_db(False)
@pytest.mark.parametrize("clients", [1, 2, 4, 5])
def test_each_connection_asks_every_user_and_the_connections_ask_different_ones(clients):
    # Connection c sends requests c, c + clients, ...: whichever worker holds it reads every
    # user's vectors during the warm-up (n % USERS left two of four connections with the even users).
    per_connection = {
        c: [user_for(n, clients=clients) for n in range(c, clients * USERS, clients)] for c in range(clients)
    }
    assert all(sorted(users) == list(range(USERS)) for users in per_connection.values())
    for step in range(USERS):
        assert len({users[step] for users in per_connection.values()}) == clients

"""All ten LoCoMo conversations loaded as ten users: no answer ever holds another user's memory.

Reads the benchmark from ``../shared/benchmarks`` (evaluation data, never copied into the
repository) and skips, saying why, where it is absent. The session-summary variant keeps the
load small (272 memories); every fourth question of all ten users is asked through the API.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evaluation.datasets import load_locomo
from evaluation.management.commands.eval_retrieval import load_corpus

BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"
CORPUS = BENCHMARKS / "locomo_session_corpus.jsonl"
CASES = BENCHMARKS / "locomo_session_retrieval.jsonl"

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"LoCoMo benchmark not found at {BENCHMARKS}")


@pytest.mark.django_db(transaction=True)
def test_ten_conversations_as_ten_users_never_leak(api):
    dataset = load_locomo(CORPUS, CASES)
    api.project.retrieval_rate_limit = 0  # ~50 questions per user in a few seconds
    api.project.save(update_fields=["retrieval_rate_limit"])
    assert len({item.user_id for item in dataset.corpus}) == 10
    ids = load_corpus(api.project, dataset, log=lambda _message: None)
    corpus_id = {memory_id: item_id for item_id, memory_id in ids.items()}
    owner = {item.id: item.user_id for item in dataset.corpus}
    asked, answered, found = Counter(), 0, 0
    for case in dataset.cases[::4]:
        body = {"user_id": case.user_id, "query": case.query, "limit": 10, "min_score": 0, "token_budget": 100_000}
        response = api.post("/retrieve", body)
        assert response.status_code == 200, response.content
        memories = response.json()["memories"]
        returned = [corpus_id[m["id"]] for m in memories]
        assert all(owner[item] == case.user_id for item in returned), (case.id, returned)
        assert all(m["user_id"] == case.user_id for m in memories)
        asked[case.user_id] += 1
        answered += bool(returned)
        found += bool(set(returned) & set(case.relevant_ids))
    assert len(asked) == 10
    # Not vacuous: the questions were answered, mostly with their evidence.
    assert answered == sum(asked.values())
    assert found / answered > 0.8

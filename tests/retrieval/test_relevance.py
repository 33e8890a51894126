"""Relevance that transfers: a semantic match passes on its own, an unrelated question gets nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.relevance_fit import CaseCandidates, SetCases, evaluate, fit, keyword_only
from memories.models import Project
from retrieval.embedding import embedders
from retrieval.ranking import relevance
from retrieval.ranking.search import Candidate
from tests.support.openai_server import Fault

HIKING = "Enjoys hiking in the mountains on weekends."


@pytest.fixture
def hiker(api, make_memory):
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=0)
    return make_memory(user_id="hiker", content=HIKING)["id"]


def ask(api, query, **body):
    response = api.post("/retrieve", {"user_id": "hiker", "query": query, **body})
    assert response.status_code == 200, response.content
    return [m["content"] for m in response.json()["memories"]]


def test_a_single_memory_user_finds_it_by_a_paraphrase(api, hiker):
    assert ask(api, "outdoor activities") == [HIKING]


def test_a_users_unrelated_question_returns_nothing(api, hiker):
    assert ask(api, "What is my blood type?") == []
    assert ask(api, "Which formatter do I use for Python?") == []


def test_an_explicit_min_score_of_zero_returns_the_ranking_without_any_cut(api, hiker):
    assert ask(api, "What is my blood type?", min_score=0) == [HIKING]


def test_standout_measures_a_cosine_against_the_same_querys_unrelated_memories():
    stats = relevance.Background(mean=np.array([0.1, 0.3]), std=np.array([0.1, 0.05]))

    def standout(query_vectors: int, **found: float) -> float:
        [found] = relevance.evidences([Candidate("m", 0.0, **found)], stats=stats, query_vectors=query_vectors)
        return found.standout

    assert standout(1, cosine=0.5) == pytest.approx(4.0)
    assert standout(2, cosine=0.45) == pytest.approx(3.5)  # the best over the query vectors: (0.45 - 0.1) / 0.1
    assert standout(1, cosine=0.2, hyde_cosine=0.48) == pytest.approx(2.0)  # the hypothesis's: (0.40 - 0.3) / 0.05
    assert standout(2, hyde_cosine=0.9) == relevance.MISSING_STANDOUT  # no hypothesis vectors to compare with


def test_the_evidence_of_many_candidates_is_each_ones_formula():
    stats = relevance.Background(mean=np.array([0.05, 0.1, 0.2]), std=np.array([0.08, 0.1, 0.07]))
    model = relevance.FITTED
    found = [
        {"cosine": 0.61, "keyword_coverage": 0.4},
        {"cosine": None, "keyword_coverage": 1.7},  # no vector yet; a share above one counts as one
        {"cosine": float("nan"), "hyde_cosine": 0.5},  # a vector of length zero; a hypothesis matched
        {"cosine": 0.3, "hyde_cosine": 0.35, "keyword_coverage": float("nan")},
        {"cosine": 1.2, "keyword_coverage": -0.2},  # out of range both ways: clamped
    ]

    def by_hand(cosine=None, hyde_cosine=None, keyword_coverage=None):
        c, s = relevance.MISSING_COSINE, relevance.MISSING_STANDOUT
        if cosine is not None and math.isfinite(cosine):
            c, s = cosine, max((cosine - m) / d for m, d in [(0.05, 0.08), (0.1, 0.1)])
        if hyde_cosine is not None:
            h = hyde_cosine - relevance.HYDE_COSINE_DISCOUNT
            c, s = max(c, h), max(s, (h - 0.2) / 0.07)
        k = keyword_coverage if keyword_coverage is not None and math.isfinite(keyword_coverage) else 0.0
        features = (min(max(c, -1.0), 1.0), min(max(s, -10.0), 20.0), min(max(k, 0.0), 1.0))
        return (*features, model.score(features))

    candidates = [Candidate(str(n), 0.0, **values) for n, values in enumerate(found)]
    got = relevance.evidences(candidates, stats=stats, query_vectors=2)
    assert [(e.cosine, e.standout, e.keyword, e.score) for e in got] == [by_hand(**values) for values in found]


def test_evidence_never_falls_when_the_cosine_or_the_keyword_share_rises():
    stats = relevance.Background(mean=np.array([0.1]), std=np.array([0.1]))
    rising = [(0.2, 0.0), (0.3, 0.0), (0.3, 0.5), (0.5, 0.5)]
    candidates = [Candidate("m", 0.0, cosine=c, keyword_coverage=k) for c, k in rising]
    scores = [found.score for found in relevance.evidences(candidates, stats=stats, query_vectors=1)]
    assert scores == sorted(scores)


def test_select_keeps_what_clears_both_the_floor_and_the_margin_below_the_best():
    scored = [("a", 0.9), ("b", 0.7), ("c", 0.5), ("d", 0.1)]
    assert relevance.select(scored, min_score=0.2, margin=0.7) == [("a", 0.9), ("b", 0.7)]
    assert relevance.select(scored, min_score=0.2, margin=0.0) == [("a", 0.9), ("b", 0.7), ("c", 0.5)]
    assert relevance.select([], min_score=0.2, margin=0.7) == []


def test_a_relevance_model_refuses_negative_weights_and_cuts_outside_zero_to_one():
    with pytest.raises(ValueError):
        relevance.RelevanceModel(weights=(1.0, -0.1, 1.0), bias=0.0, min_score=0.2, margin=0.5)
    with pytest.raises(ValueError):
        relevance.RelevanceModel(weights=(1.0, 0.1, 1.0), bias=0.0, min_score=1.5, margin=0.5)


def _synthetic_set(name: str, seed: int) -> SetCases:
    """Answerable cases whose answer has a high cosine, and negatives with only low ones."""
    rng = np.random.default_rng(seed)
    result = SetCases(name=name, has_negatives=True)
    for number in range(60):
        answerable = number % 3 != 0
        cosines = rng.uniform(0.0, 0.3, size=8)
        if answerable:
            cosines[0] = rng.uniform(0.5, 0.8)
        features = np.column_stack([cosines, cosines * 10, np.zeros(8)])
        ids = [f"{number}-{i}" for i in range(8)]
        result.cases.append(CaseCandidates(features, ids, frozenset({ids[0]} if answerable else set())))
    return result


def test_a_model_fitted_on_one_set_transfers_to_a_set_it_never_saw():
    model = fit([_synthetic_set("a", 1)])
    figures = evaluate(_synthetic_set("b", 2), model)
    assert (figures.recall_at_5, figures.negatives_empty, figures.shortfall()) == (1.0, 1.0, 0.0)
    assert model.weights[0] > 0 and model.fitted_on == "a"


def test_the_user_boilerplate_capture_writes_is_not_a_keyword_match(api, make_memory):
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=0)
    for content in ("The user likes green tea.", "The user is allergic to peanuts.", "The user lives in Porto."):
        make_memory(user_id="hiker", content=content)
    response = api.post("/retrieve", {"user_id": "hiker", "query": "What car does the user drive?", "min_score": 0})
    assert [m["matched_by"] for m in response.json()["memories"] if "keyword" in m["matched_by"]] == []


def test_without_query_vectors_a_solid_keyword_match_passes_the_cut_and_a_stray_word_does_not():
    model = relevance.KEYWORD_ONLY
    assert model.weights[:2] == (0.0, 0.0)  # fitted with the vector evidence absent
    full, half, stray = relevance.keyword_scores(
        [Candidate(m, 0.0, keyword_coverage=k) for m, k in (("full", 1.0), ("half", 0.5), ("stray", 0.15))]
    )
    assert full > half > model.min_score > stray
    assert relevance.keyword_scores([Candidate("odd", 0.0, keyword_coverage=float("nan"))]) == [model.score((0, 0, 0))]


def test_the_keyword_only_fit_sees_full_text_hits_alone_and_gives_the_vector_features_no_weight():
    rng = np.random.default_rng(5)
    train = SetCases(name="words", has_negatives=True)
    for number in range(80):
        answerable = number % 3 != 0
        keyword = rng.uniform(0.0, 0.3, size=6)
        if answerable:
            keyword[0] = rng.uniform(0.6, 1.0)
        features = np.column_stack([rng.uniform(0.0, 0.8, size=6), rng.uniform(0, 5, size=6), keyword])
        ids = [f"{number}-{i}" for i in range(6)]
        hits = np.array([True, True, True, True, False, False])
        relevant = frozenset({ids[0]} if answerable else set())
        train.cases.append(CaseCandidates(features, ids, relevant, keyword_hits=hits))
    words = keyword_only(train)
    assert [len(c.ids) for c in words.cases] == [4] * 80
    assert all((c.features[:, :2] == 0).all() for c in words.cases)
    model = fit([words])
    assert model.weights[:2] == (0.0, 0.0) and model.weights[2] > 0
    assert evaluate(words, model).recall_at_5 == 1.0


def test_a_cut_that_gets_a_required_example_wrong_is_never_chosen():
    train = _synthetic_set("a", 1)
    near_miss = CaseCandidates(np.array([[0.3, 3.0, 0.0]]), ["unrelated"], frozenset())
    required = SetCases(name="examples", cases=[near_miss], has_negatives=True)
    free, bound = fit([train]), fit([train], require=required)
    assert evaluate(required, free).negatives_empty == 0.0
    assert evaluate(required, bound).negatives_empty == 1.0
    assert evaluate(_synthetic_set("b", 2), bound).shortfall() == 0.0


def test_a_background_that_cannot_be_embedded_degrades_instead_of_failing(api, make_memory, settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    Project.objects.filter(pk=api.project.pk).update(active_embedding_model="fake-embed", retrieval_rate_limit=0)
    embedders.reset_embedder_cache()
    relevance._background_vectors.cache_clear()
    make_memory(user_id="hiker", content=HIKING)
    fake_openai.script_embeddings(None, Fault(status=503))  # the query embeds, the background fails
    response = api.post("/retrieve", {"user_id": "hiker", "query": "hiking in the mountains"})
    assert response.status_code == 200
    assert response.json()["degraded"] == ["relevance_background_unavailable"]
    assert [m["content"] for m in response.json()["memories"]] == [HIKING]
    embedders.reset_embedder_cache()

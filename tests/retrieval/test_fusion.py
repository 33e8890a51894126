"""Reciprocal rank fusion in Python."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.fusion import FusedHit, rrf


def test_rrf_of_one_ranking_scores_one_over_k_plus_rank() -> None:
    assert rrf({"vector": ["a", "b"]}) == [
        FusedHit("a", 1 / 61, {"vector": 1}),
        FusedHit("b", 1 / 62, {"vector": 2}),
    ]


def test_rrf_adds_the_contributions_of_every_ranking_an_id_appears_in() -> None:
    hits = rrf({"keyword": ["a", "b"], "vector": ["b", "c"]}, k=60)
    assert [hit.id for hit in hits] == ["b", "a", "c"]
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert hits[0].ranks == {"keyword": 2, "vector": 1}


def test_rrf_weights_scale_a_source_and_missing_weights_count_as_one() -> None:
    hits = rrf({"keyword": ["a"], "vector": ["b"]}, k=0, weights={"keyword": 3.0})
    assert [(hit.id, hit.score) for hit in hits] == [("a", 3.0), ("b", 1.0)]


def test_rrf_counts_an_id_repeated_in_one_ranking_at_its_best_rank() -> None:
    assert rrf({"hyde": ["a", "b", "a"]}, k=0) == [FusedHit("a", 1.0, {"hyde": 1}), FusedHit("b", 0.5, {"hyde": 2})]


def test_rrf_breaks_ties_by_best_rank_then_id() -> None:
    # With k=0, b (rank 2 twice) and d (rank 1 once) both score exactly 1; d has the better rank.
    hits = rrf({"x": ["a", "b", "c"], "y": ["d", "b", "a"]}, k=0)
    assert [(hit.id, hit.score) for hit in hits] == [("a", 1 + 1 / 3), ("d", 1.0), ("b", 1.0), ("c", 1 / 3)]
    assert [hit.id for hit in rrf({"x": ["z"], "y": ["m"]})] == ["m", "z"]


def test_rrf_of_nothing_is_empty() -> None:
    assert rrf({}) == []
    assert rrf({"vector": []}) == []


def test_rrf_rejects_a_negative_k_and_negative_or_non_finite_weights() -> None:
    with pytest.raises(ValueError, match="k must be non-negative"):
        rrf({"x": ["a"]}, k=-1)
    with pytest.raises(ValueError, match="weights"):
        rrf({"x": ["a"]}, weights={"x": -1.0})
    with pytest.raises(ValueError, match="weights"):
        rrf({"x": ["a"]}, weights={"x": math.nan})


rankings = st.dictionaries(
    st.sampled_from(["keyword", "vector", "hyde:0", "hyde:1"]), st.lists(st.sampled_from("abcdefg"))
)


@given(rankings)
def test_rrf_order_does_not_depend_on_the_order_of_the_rankings(by_source: dict[str, list[str]]) -> None:
    reversed_sources = dict(reversed(list(by_source.items())))
    assert rrf(by_source) == rrf(reversed_sources)


@given(rankings)
def test_rrf_returns_each_id_once_with_scores_not_increasing(by_source: dict[str, list[str]]) -> None:
    hits = rrf(by_source)
    assert sorted(hit.id for hit in hits) == sorted({i for ids in by_source.values() for i in ids})
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))

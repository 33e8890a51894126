"""Metric values computed by hand, and the aggregation rules of the benchmark README."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluation.metrics import (
    GOLDEN_THRESHOLDS,
    CaseResult,
    all_at_k,
    failed_thresholds,
    hit_at_k,
    latency_histogram,
    mrr,
    ndcg_at_k,
    percentile,
    precision_at_k,
    recall_at_k,
    summarise,
)

RANKED = ["a", "b", "c", "d", "e"]
RELEVANT = {"b", "e", "x"}  # "x" is never retrieved


def test_recall_counts_relevant_ids_found_in_the_top_k() -> None:
    assert recall_at_k(RANKED, RELEVANT, 1) == 0.0
    assert recall_at_k(RANKED, RELEVANT, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, RELEVANT, 5) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, RELEVANT, 10) == pytest.approx(2 / 3)


def test_precision_divides_by_k_even_when_fewer_were_returned() -> None:
    assert precision_at_k(RANKED, RELEVANT, 2) == 0.5
    assert precision_at_k(RANKED, RELEVANT, 5) == pytest.approx(2 / 5)
    assert precision_at_k(RANKED, RELEVANT, 10) == pytest.approx(2 / 10)


def test_hit_and_all_at_k() -> None:
    assert hit_at_k(RANKED, RELEVANT, 1) == 0.0
    assert hit_at_k(RANKED, RELEVANT, 2) == 1.0
    assert all_at_k(RANKED, RELEVANT, 5) == 0.0
    assert all_at_k(RANKED, {"b", "e"}, 5) == 1.0
    assert all_at_k(RANKED, {"b", "e"}, 4) == 0.0


def test_ndcg_uses_binary_gains_and_log2_discount() -> None:
    dcg = 1 / math.log2(3) + 1 / math.log2(6)  # hits at ranks 2 and 5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three relevant ids, k = 5
    assert ndcg_at_k(RANKED, RELEVANT, 5) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(RANKED, RELEVANT, 5) == pytest.approx(0.477624, abs=1e-6)
    assert ndcg_at_k(["a", "b"], {"b"}, 2) == pytest.approx(1 / math.log2(3))


def test_ndcg_ideal_is_over_min_of_relevant_count_and_k() -> None:
    # Three relevant ids but k = 2: two hits at the top is a perfect score.
    assert ndcg_at_k(["b", "e", "a"], RELEVANT, 2) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], RELEVANT, 1) == pytest.approx(1.0)


def test_mrr_looks_at_the_whole_ranking() -> None:
    assert mrr(RANKED, RELEVANT) == 0.5
    assert mrr([f"n{i}" for i in range(14)] + ["b"], RELEVANT) == pytest.approx(1 / 15)
    assert mrr(["a", "c"], RELEVANT) == 0.0


def test_a_repeated_id_earns_credit_once() -> None:
    assert recall_at_k(["b", "b"], {"b", "e"}, 2) == 0.5
    assert precision_at_k(["b", "b"], {"b", "e"}, 2) == 0.5


def test_empty_relevant_set_scores_zero_and_bad_k_is_rejected() -> None:
    assert recall_at_k(RANKED, set(), 5) == 0.0
    assert ndcg_at_k(RANKED, set(), 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(RANKED, RELEVANT, 0)


@given(
    ranked=st.lists(st.sampled_from("abcdefghij"), max_size=12),
    relevant=st.sets(st.sampled_from("abcdefghijxyz"), min_size=1),
    k=st.integers(min_value=1, max_value=12),
)
def test_metrics_stay_in_range_and_recall_grows_with_k(ranked: list[str], relevant: set[str], k: int) -> None:
    for value in (
        recall_at_k(ranked, relevant, k),
        precision_at_k(ranked, relevant, k),
        ndcg_at_k(ranked, relevant, k),
        mrr(ranked, relevant),
    ):
        assert 0.0 <= value <= 1.0 + 1e-12
    assert recall_at_k(ranked, relevant, k) <= recall_at_k(ranked, relevant, k + 1)
    assert hit_at_k(ranked, relevant, k) >= all_at_k(ranked, relevant, k)


def test_percentile_interpolates_linearly() -> None:
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)
    assert percentile([7], 95) == 7
    assert percentile([], 50) is None


def _results() -> list[CaseResult]:
    return [
        CaseResult("r1", "single-hop", ["a", "b"], {"b"}, latency_ms=10, token_count=100, token_budget=200),
        CaseResult("r2", "single-hop", ["c"], {"c"}, latency_ms=30, token_count=300, token_budget=200),
        CaseResult("r3", "adversarial", [], {"z"}, latency_ms=20),
        CaseResult("r4", "temporal", ["q"], set()),  # unlabelled: counted, never scored
        CaseResult("r5", "negative", [], set(), negative=True, latency_ms=40),
        CaseResult("r6", "negative", ["m"], set(), negative=True, leaked_ids=["m"], forbidden_ids={"m"}),
    ]


def test_summary_means_are_over_scored_cases_only() -> None:
    overall = summarise(_results())["overall"]
    assert (overall["n"], overall["cases"], overall["unlabelled"]) == (3, 6, 1)
    assert overall["R@1"] == pytest.approx(1 / 3)
    assert overall["R@5"] == pytest.approx(2 / 3)
    assert overall["MRR"] == pytest.approx(0.5)
    assert overall["P@5"] == pytest.approx((1 / 5 + 1 / 5 + 0) / 3)


def test_headline_group_leaves_adversarial_out_and_categories_are_separate() -> None:
    summary = summarise(_results())
    assert summary["headline"]["n"] == 2
    assert summary["headline"]["MRR"] == pytest.approx(0.75)
    assert summary["categories"]["adversarial"]["n"] == 1
    assert summary["categories"]["adversarial"]["R@10"] == 0.0
    assert summary["categories"]["temporal"]["R@10"] is None
    assert set(summary["categories"]) == {"single-hop", "adversarial", "temporal", "negative"}


def test_summary_safety_budget_and_latency_figures() -> None:
    overall = summarise(_results())["overall"]
    assert (overall["negatives"], overall["negatives_empty"], overall["negatives_empty_rate"]) == (2, 1, 0.5)
    assert (overall["leaked_ids"], overall["cases_with_leaks"], overall["cases_with_forbidden"]) == (1, 1, 1)
    assert overall["returned_precision"] == pytest.approx((1 / 2 + 1) / 2)
    assert overall["returned_precision_n"] == 2
    assert overall["token_budget_compliance"] == 0.5
    assert overall["latency_p50_ms"] == 25
    assert overall["latency_p95_ms"] == pytest.approx(38.5)


def test_latency_histogram_buckets_are_closed_on_the_right() -> None:
    results = [CaseResult(str(v), "c", [], {"a"}, latency_ms=v) for v in (3, 5, 7, 5000)]
    buckets = latency_histogram(results, bounds=(5, 10))
    assert [(b["lo"], b["hi"], b["count"]) for b in buckets] == [(0.0, 5, 2), (5, 10, 1), (10, None, 1)]


def test_thresholds_report_every_failure_and_an_empty_run_fails() -> None:
    summary = summarise(_results())
    failures = failed_thresholds(summary, GOLDEN_THRESHOLDS)
    assert any(f.startswith("R@5:") for f in failures)
    assert any(f.startswith("leaked_ids:") for f in failures)
    assert failed_thresholds(summarise([]), {"R@5": 0.5}) == ["R@5: no value (no cases)"]
    assert failed_thresholds(summary, {"MRR": 0.5, "max:leaked_ids": 1}) == []

"""Baseline files are read and compared group by group, metric by metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluation.baselines import BaselineError, baselines_for_corpus, compare, load_baselines
from evaluation.metrics import CaseResult, summarise


def _stats(n: int, r5: float, mrr: float) -> dict[str, float]:
    return {"n": n, "R@5": r5, "MRR": mrr}


@pytest.fixture
def baseline_file(tmp_path: Path) -> Path:
    raw: dict[str, Any] = {
        "corpus": "toy_corpus.jsonl",
        "cases": "toy_retrieval.jsonl",
        "results": {
            "bm25": {"all": _stats(3, 0.4, 0.5), "all_non_adversarial": _stats(2, 0.5, 0.6),
                     "single-hop": _stats(2, 0.5, 0.6), "adversarial": _stats(1, 0.2, 0.3)},
            "dense": {"all": _stats(3, 0.6, 0.4), "all_non_adversarial": _stats(2, 0.7, 0.5),
                      "single-hop": _stats(2, 0.7, 0.5), "adversarial": _stats(1, 0.1, 0.2)},
        },
    }  # fmt: skip
    path = tmp_path / "toy_baselines.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _summary() -> dict[str, Any]:
    return summarise(
        [
            CaseResult("q1", "single-hop", ["a"], {"a"}),
            CaseResult("q2", "single-hop", ["x", "b"], {"b"}),
            CaseResult("q3", "adversarial", ["x"], {"c"}),
        ]
    )


def test_load_baselines_names_the_variant_and_keeps_every_group(baseline_file: Path) -> None:
    baselines = load_baselines(baseline_file)
    assert baselines["name"] == "toy"
    assert baselines["corpus"] == "toy_corpus.jsonl"
    assert baselines["results"]["dense"]["adversarial"] == {"n": 1, "R@5": 0.1, "MRR": 0.2}


def test_compare_names_the_best_baseline_and_the_delta(baseline_file: Path) -> None:
    comparison = compare(_summary(), load_baselines(baseline_file))
    headline = comparison["groups"]["all_non_adversarial"]
    assert (headline["n_ours"], headline["n_baseline"], headline["comparable"]) == (2, 2, True)
    r5 = headline["metrics"]["R@5"]
    assert (r5["ours"], r5["best_method"], r5["best"]) == (1.0, "dense", 0.7)
    assert r5["delta"] == pytest.approx(0.3)
    assert headline["metrics"]["MRR"]["best_method"] == "bm25"
    assert headline["metrics"]["MRR"]["delta"] == pytest.approx(0.75 - 0.6)
    assert comparison["groups"]["adversarial"]["metrics"]["R@5"]["delta"] == pytest.approx(-0.2)
    assert comparison["methods"] == ["bm25", "dense"]


def test_compare_flags_groups_with_a_different_case_count(baseline_file: Path) -> None:
    summary = summarise([CaseResult("q1", "single-hop", ["a"], {"a"})])
    comparison = compare(summary, load_baselines(baseline_file))
    assert comparison["groups"]["single-hop"]["comparable"] is False
    assert "temporal" not in comparison["groups"]


def test_baselines_for_corpus_picks_the_file_measured_on_that_corpus(baseline_file: Path) -> None:
    found = baselines_for_corpus(baseline_file.parent, "/anywhere/toy_corpus.jsonl")
    assert found is not None and found["name"] == "toy"
    assert baselines_for_corpus(baseline_file.parent, "other_corpus.jsonl") is None


def test_a_malformed_baseline_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad_baselines.json"
    path.write_text(json.dumps({"results": {"bm25": {"all": {"n": 3, "R@5": "high"}}}}), encoding="utf-8")
    with pytest.raises(BaselineError, match="R@5 must be a number"):
        load_baselines(path)

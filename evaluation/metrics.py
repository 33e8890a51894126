"""Retrieval metrics with binary relevance, and the per-run summary.

The definitions follow /work/shared/benchmarks/README.md ("Metrics") so that a summary of a
LoCoMo run can be put next to the published baseline files key for key:

* ``R@k``    |relevant ∩ top-k| / |relevant|
* ``Hit@k``  1 if any relevant id is in the top k (LongMemEval "recall_any")
* ``All@k``  1 if every relevant id is in the top k (LongMemEval "recall_all")
* ``P@k``    |relevant ∩ top-k| / k  (k, not the number returned: a short list is penalised)
* ``NDCG@k`` binary gains, log2 discount, ideal DCG over min(|relevant|, k)
* ``MRR``    1 / rank of the first relevant id in the whole ranking (0 when none)

Ranking metrics are averaged over cases with a non-empty relevant set only; cases without
labels are counted but never scored, exactly as the baselines did.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
# LoCoMo reports its adversarial category apart from the headline, as the field does.
DEFAULT_HEADLINE_EXCLUDE: tuple[str, ...] = ("adversarial",)
HEADLINE_GROUP = "all_non_adversarial"
LATENCY_BUCKETS_MS: tuple[float, ...] = (5, 10, 25, 50, 100, 200, 500, 1000, 2000)

Number = float | int | None

# The recall spec's blocking gates for the golden set ("Evaluation Plan"). Its "Precision@5
# >= 70 % (of returned memories are relevant)" is ``returned_precision`` here: P@5 divides by
# 5, so a case with one relevant memory could never pass 0.2 with it.
GOLDEN_THRESHOLDS: dict[str, float] = {
    "R@5": 0.80,
    "returned_precision": 0.70,
    "token_budget_compliance": 1.0,
    "max:leaked_ids": 0,
}


@dataclass(frozen=True)
class CaseResult:
    """What one evaluated case produced, as the metrics need it.

    ``ranked_ids`` is everything the engine returned, best first. ``negative`` marks a case
    whose correct answer is "nothing" (an empty ``relevant_ids`` on a case that is *not*
    negative means "unlabelled" and the case is skipped). ``leaked_ids`` are returned ids that
    belong to another user; ``forbidden_ids`` are ids the case must not return (superseded
    versions, other users' memories) — the runner fills both from the dataset.
    """

    case_id: str
    category: str
    ranked_ids: Sequence[str]
    relevant_ids: Collection[str]
    negative: bool = False
    latency_ms: float | None = None
    token_count: int | None = None
    token_budget: int | None = None
    leaked_ids: Sequence[str] = ()
    forbidden_ids: Collection[str] = field(default_factory=frozenset)

    @property
    def scored(self) -> bool:
        """True when ranking metrics apply: the case has at least one relevant id."""
        return bool(self.relevant_ids)


def _unique(ranked_ids: Iterable[str]) -> list[str]:
    # An engine that repeats an id must not earn credit twice (recall could exceed 1).
    return list(dict.fromkeys(ranked_ids))


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def _hits_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> int:
    _check_k(k)
    rel = set(relevant)
    return sum(1 for doc_id in _unique(ranked_ids)[:k] if doc_id in rel)


def recall_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Fraction of the relevant ids found in the top k; 0.0 when nothing is relevant."""
    rel = set(relevant)
    if not rel:
        return 0.0
    return _hits_at_k(ranked_ids, rel, k) / len(rel)


def precision_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Relevant ids in the top k divided by k (not by how many were returned)."""
    return _hits_at_k(ranked_ids, relevant, k) / k


def hit_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in the top k, else 0.0."""
    return 1.0 if _hits_at_k(ranked_ids, relevant, k) > 0 else 0.0


def all_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if every relevant id is in the top k (and there is at least one), else 0.0."""
    rel = set(relevant)
    return 1.0 if rel and _hits_at_k(ranked_ids, rel, k) == len(rel) else 0.0


def ndcg_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Binary-gain NDCG: DCG of the top k over the DCG of min(|relevant|, k) perfect hits."""
    _check_k(k)
    rel = set(relevant)
    if not rel:
        return 0.0
    dcg = sum(
        1.0 / math.log2(rank + 1) for rank, doc_id in enumerate(_unique(ranked_ids)[:k], start=1) if doc_id in rel
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(rel), k) + 1))
    return dcg / ideal


def mrr(ranked_ids: Sequence[str], relevant: Collection[str]) -> float:
    """Reciprocal rank of the first relevant id in the whole ranking; 0.0 if none is there."""
    rel = set(relevant)
    for rank, doc_id in enumerate(_unique(ranked_ids), start=1):
        if doc_id in rel:
            return 1.0 / rank
    return 0.0


def case_metrics(
    ranked_ids: Sequence[str], relevant: Collection[str], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """Every ranking metric of one case, keyed like the baseline files (``R@5``, ``MRR``…)."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"R@{k}"] = recall_at_k(ranked_ids, relevant, k)
        out[f"Hit@{k}"] = hit_at_k(ranked_ids, relevant, k)
        out[f"All@{k}"] = all_at_k(ranked_ids, relevant, k)
        out[f"P@{k}"] = precision_at_k(ranked_ids, relevant, k)
        out[f"NDCG@{k}"] = ndcg_at_k(ranked_ids, relevant, k)
    out["MRR"] = mrr(ranked_ids, relevant)
    return out


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Ranking metric keys in the order the baseline files list them."""
    names = [f"{m}@{k}" for k in ks for m in ("R", "Hit", "All", "P", "NDCG")]
    return [*names, "MRR"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) with linear interpolation; None for no values."""
    return float(np.percentile(values, q)) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _ranking_stats(results: Sequence[CaseResult], ks: Sequence[int]) -> dict[str, Number]:
    scored = [r for r in results if r.scored]
    per_case = [case_metrics(r.ranked_ids, r.relevant_ids, ks) for r in scored]
    out: dict[str, Number] = {"n": len(scored), "cases": len(results)}
    for name in metric_names(ks):
        out[name] = _mean([m[name] for m in per_case])
    return out


def _safety_stats(results: Sequence[CaseResult]) -> dict[str, Number]:
    negatives = [r for r in results if r.negative and not r.relevant_ids]
    empty = sum(1 for r in negatives if not r.ranked_ids)
    answered = [r for r in results if r.scored and r.ranked_ids]
    precisions = [
        _hits_at_k(r.ranked_ids, r.relevant_ids, len(r.ranked_ids)) / len(_unique(r.ranked_ids)) for r in answered
    ]
    forbidden = [r for r in results if set(r.ranked_ids) & set(r.forbidden_ids)]
    return {
        "unlabelled": sum(1 for r in results if not r.relevant_ids and not r.negative),
        "negatives": len(negatives),
        "negatives_empty": empty,
        "negatives_empty_rate": _rate(empty, len(negatives)),
        "returned_precision_n": len(answered),
        "returned_precision": _mean(precisions),
        "leaked_ids": sum(len(set(r.leaked_ids)) for r in results),
        "cases_with_leaks": sum(1 for r in results if r.leaked_ids),
        "cases_with_forbidden": len(forbidden),
    }


def _budget_and_latency_stats(results: Sequence[CaseResult]) -> dict[str, Number]:
    budgeted = [
        (r.token_count, r.token_budget) for r in results if r.token_count is not None and r.token_budget is not None
    ]
    compliant = sum(1 for count, budget in budgeted if count <= budget)
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    return {
        "token_budget_n": len(budgeted),
        "token_budget_compliant": compliant,
        "token_budget_compliance": _rate(compliant, len(budgeted)),
        "latency_n": len(latencies),
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p95_ms": percentile(latencies, 95),
        "latency_mean_ms": _mean(latencies),
        "latency_max_ms": max(latencies) if latencies else None,
    }


def group_stats(results: Sequence[CaseResult], ks: Sequence[int] = DEFAULT_KS) -> dict[str, Number]:
    """Ranking means plus safety, budget and latency figures for one group of cases."""
    return {**_ranking_stats(results, ks), **_safety_stats(results), **_budget_and_latency_stats(results)}


def latency_histogram(
    results: Sequence[CaseResult], bounds: Sequence[float] = LATENCY_BUCKETS_MS
) -> list[dict[str, Any]]:
    """Counts of per-case latency in buckets ``[0, b0]``, ``(b0, b1]`` … ``(bn, ∞)`` (hi None)."""
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    buckets: list[dict[str, Any]] = []
    lo = 0.0
    for hi in bounds:
        inside = [v for v in latencies if (v > lo or lo == 0.0) and v <= hi]
        buckets.append({"lo": lo, "hi": hi, "count": len(inside)})
        lo = hi
    buckets.append({"lo": lo, "hi": None, "count": sum(1 for v in latencies if v > lo)})
    return buckets


def summarise(
    results: Sequence[CaseResult],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    headline_exclude: Collection[str] = DEFAULT_HEADLINE_EXCLUDE,
) -> dict[str, Any]:
    """Aggregate per-case results into overall, headline and per-category figures.

    ``overall`` matches the baselines' ``all`` group (every scored case), ``headline`` their
    ``all_non_adversarial`` group (every case whose category is not in ``headline_exclude``:
    categories 1–4 for LoCoMo), and ``categories`` one entry per category name. Every group
    has the same keys (see ``group_stats``); means are over scored cases (``n``).
    """
    by_category: dict[str, list[CaseResult]] = {}
    for result in results:
        by_category.setdefault(result.category, []).append(result)
    headline = [r for r in results if r.category not in headline_exclude]
    return {
        "ks": list(ks),
        "metrics": metric_names(ks),
        "headline_group": HEADLINE_GROUP,
        "headline_exclude": sorted(headline_exclude),
        "overall": group_stats(results, ks),
        "headline": group_stats(headline, ks),
        "categories": {name: group_stats(by_category[name], ks) for name in sorted(by_category)},
        "latency_histogram": latency_histogram(results),
    }


def baseline_groups(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Number]]:
    """The summary's groups under the names the baseline files use (``all``, categories…)."""
    groups: dict[str, Mapping[str, Number]] = {"all": summary["overall"], HEADLINE_GROUP: summary["headline"]}
    groups.update(summary["categories"])
    return groups


def failed_thresholds(
    summary: Mapping[str, Any], thresholds: Mapping[str, float], *, group: str = "overall"
) -> list[str]:
    """Human-readable failures of ``thresholds`` (metric → minimum) in one summary group.

    Metrics where lower is better must be given as ``max:<name>`` (e.g. ``max:leaked_ids``).
    A metric that could not be computed (no cases) counts as a failure: a gate must not pass
    on an empty run.
    """
    stats = summary[group]
    failures: list[str] = []
    for key, limit in thresholds.items():
        name = key.removeprefix("max:")
        value = stats.get(name)
        if value is None:
            failures.append(f"{name}: no value (no cases)")
        elif key.startswith("max:") and value > limit:
            failures.append(f"{name}: {value:.3f} above the maximum {limit:.3f}")
        elif not key.startswith("max:") and value < limit:
            failures.append(f"{name}: {value:.3f} below the minimum {limit:.3f}")
    return failures

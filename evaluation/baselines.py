"""Published baseline numbers (BM25, dense, RRF on LoCoMo) and how a run compares to them.

A baseline file (``/work/shared/benchmarks/baselines/locomo_<variant>_baselines.json``) is::

    {"corpus": "<corpus file name>", "cases": "<cases file name>",
     "results": {<method>: {<group>: {"n": int, "R@1": float, …, "MRR": float}}}}

where ``<group>`` is ``all``, ``all_non_adversarial`` (LoCoMo categories 1–4) or a category
name. The metric keys are the ones ``metrics.summarise`` produces, so groups line up by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluation.metrics import baseline_groups


class BaselineError(ValueError):
    """A baseline file does not have the expected shape."""


def _check_group(method: str, group: str, stats: Any, source: str) -> dict[str, float]:
    if not isinstance(stats, dict) or "n" not in stats:
        raise BaselineError(f"{source}: results.{method}.{group} must be an object with 'n'")
    for key, value in stats.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise BaselineError(f"{source}: results.{method}.{group}.{key} must be a number")
    return {str(key): float(value) if key != "n" else int(value) for key, value in stats.items()}


def load_baselines(path: str | Path) -> dict[str, Any]:
    """Read one baseline file; returns ``{"name", "corpus", "cases", "results"}``.

    ``name`` is the file stem without ``_baselines`` (``locomo_turn``). Numbers are validated
    so a malformed file fails here, not halfway through a report.
    """
    source = Path(path)
    raw = json.loads(source.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("results"), dict):
        raise BaselineError(f"{source}: expected an object with a 'results' object")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for method, groups in raw["results"].items():
        if not isinstance(groups, dict):
            raise BaselineError(f"{source}: results.{method} must be an object")
        results[method] = {group: _check_group(method, group, stats, str(source)) for group, stats in groups.items()}
    return {
        "name": source.stem.removesuffix("_baselines"),
        "corpus": str(raw.get("corpus", "")),
        "cases": str(raw.get("cases", "")),
        "results": results,
    }


def baselines_for_corpus(directory: str | Path, corpus_path: str | Path) -> dict[str, Any] | None:
    """The baseline file in ``directory`` measured on the corpus file ``corpus_path``, if any."""
    wanted = Path(corpus_path).name
    for candidate in sorted(Path(directory).glob("*_baselines.json")):
        baselines = load_baselines(candidate)
        if baselines["corpus"] == wanted:
            return baselines
    return None


def _best(values: Mapping[str, float]) -> tuple[str, float] | tuple[None, None]:
    if not values:
        return None, None
    # Every metric here is "higher is better"; ties go to the alphabetically first method.
    method = max(sorted(values), key=lambda name: values[name])
    return method, values[method]


def _compare_metric(ours: float | int | None, per_method: Mapping[str, float]) -> dict[str, Any]:
    best_method, best = _best(per_method)
    delta = None if ours is None or best is None else ours - best
    return {"ours": ours, "best_method": best_method, "best": best, "delta": delta, "baselines": dict(per_method)}


def _compare_group(
    ours: Mapping[str, Any], group: str, results: Mapping[str, Any], metrics: list[str]
) -> dict[str, Any]:
    with_group = {method: groups[group] for method, groups in results.items() if group in groups}
    n_baseline = next((int(stats["n"]) for stats in with_group.values()), None)
    compared = {}
    for metric in metrics:
        per_method = {method: stats[metric] for method, stats in with_group.items() if metric in stats}
        if per_method:
            compared[metric] = _compare_metric(ours.get(metric), per_method)
    return {
        "n_ours": ours.get("n"),
        "n_baseline": n_baseline,
        # Different case counts (a --limit run, other skips) make deltas indicative only.
        "comparable": ours.get("n") == n_baseline,
        "metrics": compared,
    }


def compare(summary: Mapping[str, Any], baselines: Mapping[str, Any]) -> dict[str, Any]:
    """Per group and metric: our value, the best baseline (method and value) and the delta.

    Only groups present on both sides are compared. ``comparable`` is False for a group whose
    case count differs from the baseline's, because then the two are not the same questions.
    """
    ours = baseline_groups(summary)
    results: Mapping[str, Any] = baselines["results"]
    baseline_group_names = {group for groups in results.values() for group in groups}
    metrics = list(summary["metrics"])
    groups = {
        group: _compare_group(ours[group], group, results, metrics) for group in ours if group in baseline_group_names
    }
    return {
        "baseline": baselines.get("name"),
        "corpus": baselines.get("corpus"),
        "cases": baselines.get("cases"),
        "methods": sorted(results),
        "groups": groups,
    }

"""Scoring a capture evaluation's runs (``evaluation.capture``) by meaning, and its reports.

The memories a job wrote are matched one-to-one to the expected ones: the cosine similarity of
their all-MiniLM vectors must reach ``MATCH_THRESHOLD``, both must say the same about negation,
and the memory must hold the expected item's ``values`` when it lists any.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from capture.models import JobStatus
from evaluation.capture import SPLITS, Case, Run
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.embedding.vector_cache import embed_texts

# Checked by hand on 42 labelled pairs (evaluation/data/capture/threshold_pairs.jsonl, docs/adr/0011): at 0.65,
# 18 of 20 paraphrases match (the 2 others by negation wording) and 4 of 22 different facts do;
# at 0.7, 14 of 20 and 3 of 22.
MATCH_THRESHOLD = 0.65
_NEGATION = re.compile(r"\b(?:not|no|never|nothing|none|neither|nor|cannot|no longer)\b|n't\b", re.IGNORECASE)


def has_negation(text: str) -> bool:
    return bool(_NEGATION.search(text))


@dataclass
class Match:
    expected: int
    produced: int
    similarity: float
    fact: str  # the wording of the expected memory that matched best


@dataclass
class Score:
    """What one case's run scores."""

    case: Case
    run: Run
    matches: list[Match] = field(default_factory=list)
    similarities: list[list[float]] = field(default_factory=list)  # produced x expected (best wording)

    def _required(self) -> list[int]:
        return [i for i, e in enumerate(self.case.expect) if not e.optional]

    @property
    def hits(self) -> list[Match]:
        return [m for m in self.matches if not self.case.expect[m.expected].optional]

    @property
    def required(self) -> int:
        return len(self._required())

    @property
    def false_positives(self) -> list[int]:
        matched = {m.produced for m in self.matches}
        return [i for i in range(len(self.run.produced)) if i not in matched]

    @property
    def misses(self) -> list[int]:
        hit = {m.expected for m in self.hits}
        return [i for i in self._required() if i not in hit]

    def supersedes(self) -> tuple[int, int]:
        """(expected supersedes, detected): the matched memory replaces exactly the right one."""
        expected = [i for i in self._required() if self.case.expect[i].supersedes]
        detected = 0
        for match in self.hits:
            target = self.case.expect[match.expected].supersedes
            if target and self.run.produced[match.produced].supersedes == self.run.ids.get(target):
                detected += 1
        return len(expected), detected

    def wrong_supersedes(self) -> int:
        """Memories written as the successor of a memory they should not replace."""
        right = {m.produced: self.case.expect[m.expected].supersedes for m in self.matches}
        wrong = 0
        for index, produced in enumerate(self.run.produced):
            target = right.get(index)
            if produced.supersedes and produced.supersedes != (self.run.ids.get(target) if target else None):
                wrong += 1
        return wrong

    def links(self) -> tuple[int, int]:
        expected = found = 0
        for match in self.hits:
            wanted = {self.run.ids.get(key) for key in self.case.expect[match.expected].links}
            expected += len(wanted)
            found += len(wanted & set(self.run.produced[match.produced].links))
        return expected + sum(len(self.case.expect[i].links) for i in self.misses), found

    def label_errors(self) -> dict[str, int]:
        errors = {"scope": 0, "kind": 0, "category": 0}
        for match in self.hits:
            expected, produced = self.case.expect[match.expected], self.run.produced[match.produced]
            errors["scope"] += produced.scope != expected.scope
            errors["kind"] += produced.kind not in expected.kinds
            errors["category"] += produced.category not in expected.categories
        return errors

    def secrets_stored(self) -> int:
        return sum(any(s in p.stored_text for s in self.case.secrets) for p in self.run.produced)


def score_runs(runs: Sequence[Run], *, threshold: float = MATCH_THRESHOLD) -> list[Score]:
    """Match each run's memories to its expected ones (see the module docstring), and record
    under which key a matched memory can be referred to by later cases of its chain."""
    texts = sorted(
        {f for run in runs for e in run.case.expect for f in e.facts}
        | {p.content for run in runs for p in run.produced}
    )
    vectors = dict(zip(texts, embed_texts(texts, embedder=embedder_for_model(LOCAL_MODEL_NAME)), strict=True))
    scores = []
    for run in runs:
        score = _score(run, vectors, threshold)
        for match in score.matches:
            key = run.case.expect[match.expected].key
            if key:
                run.ids[key] = run.produced[match.produced].memory_id
        scores.append(score)
    return scores


def _score(run: Run, vectors: Mapping[str, Any], threshold: float) -> Score:
    score = Score(case=run.case, run=run)
    candidates: list[tuple[bool, float, int, int, str]] = []
    for p, produced in enumerate(run.produced):
        row = []
        for e, expected in enumerate(run.case.expect):
            best, fact = max((float(np.dot(vectors[produced.content], vectors[f])), f) for f in expected.facts)
            row.append(round(best, 3))
            if not expected.accepts(produced.content):
                continue
            # Any wording of the expected memory may match, as long as it agrees on negation.
            for wording in expected.facts:
                similarity = float(np.dot(vectors[produced.content], vectors[wording]))
                if similarity >= threshold and has_negation(wording) == has_negation(produced.content):
                    candidates.append((expected.optional, -similarity, e, p, wording))
        score.similarities.append(row)
    # Greedy one-to-one: required memories first, then the most similar pairs.
    used_e: set[int] = set()
    used_p: set[int] = set()
    for _optional, negative, e, p, wording in sorted(candidates):
        if e not in used_e and p not in used_p:
            used_e.add(e)
            used_p.add(p)
            score.matches.append(Match(expected=e, produced=p, similarity=round(-negative, 3), fact=wording))
    return score


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def summarise(scores: Sequence[Score]) -> dict[str, Any]:
    """The headline figures over ``scores``."""
    hits = sum(len(s.hits) for s in scores)
    false_positives = sum(len(s.false_positives) for s in scores)
    required = sum(s.required for s in scores)
    supersedes = [s.supersedes() for s in scores]
    links = [s.links() for s in scores]
    errors = [s.label_errors() for s in scores]
    nothing = [s for s in scores if s.case.expects_nothing]
    seconds = sum(s.run.seconds for s in scores)
    return {
        "cases": len(scores),
        "expected_memories": required,
        "produced_memories": sum(len(s.run.produced) for s in scores),
        "matched": hits,
        "false_positives": false_positives,
        "precision": _ratio(hits, hits + false_positives),
        "recall": _ratio(hits, required),
        "supersedes_expected": sum(e for e, _ in supersedes),
        "supersedes_detected": sum(d for _, d in supersedes),
        "supersede_detection": _ratio(sum(d for _, d in supersedes), sum(e for e, _ in supersedes)),
        "wrong_supersedes": sum(s.wrong_supersedes() for s in scores),
        "wrong_scope_rate": _ratio(sum(e["scope"] for e in errors), hits),
        "wrong_kind_rate": _ratio(sum(e["kind"] for e in errors), hits),
        "wrong_category_rate": _ratio(sum(e["category"] for e in errors), hits),
        "links_expected": sum(e for e, _ in links),
        "links_found": sum(f for _, f in links),
        "secrets_stored": sum(s.secrets_stored() for s in scores),
        "nothing_cases": len(nothing),
        "nothing_correct": sum(not s.run.produced for s in nothing),
        "jobs_failed": sum(s.run.job_status != JobStatus.DONE for s in scores),
        "jobs_per_second": round(len(scores) / seconds, 1) if seconds else None,
        "job_seconds_p50": _percentile([s.run.seconds for s in scores], 50),
        "job_seconds_p95": _percentile([s.run.seconds for s in scores], 95),
        "first_attempt_usable": _ratio(sum(s.run.attempts == 1 for s in scores), len(scores)),
        "items_rejected": sum(s.run.items_rejected for s in scores),
    }


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def report(scores: Sequence[Score], *, threshold: float = MATCH_THRESHOLD) -> dict[str, Any]:
    """Figures for the whole set, each split and each domain, and every case's details."""
    by_split = {split: summarise([s for s in scores if s.case.split == split]) for split in SPLITS}
    domains = sorted({s.case.domain for s in scores})
    return {
        "threshold": threshold,
        "all": summarise(scores),
        "splits": by_split,
        "domains": {d: summarise([s for s in scores if s.case.domain == d]) for d in domains},
        "cases": [case_details(s) for s in scores],
    }


def case_details(score: Score) -> dict[str, Any]:
    run, case = score.run, score.case
    return {
        "id": case.id,
        "domain": case.domain,
        "split": case.split,
        "job": {
            "status": run.job_status,
            "error": run.job_error,
            "extractor": run.extractor,
            "attempts": run.attempts,
            "items_rejected": run.items_rejected,
            "seconds": round(run.seconds, 2),
        },
        "expected": [
            {
                "fact": e.facts[0],
                "kind": list(e.kinds),
                "scope": e.scope,
                "supersedes": e.supersedes,
                "optional": e.optional,
            }
            for e in case.expect
        ],
        "produced": [
            {
                "content": p.content,
                "kind": p.kind,
                "category": p.category,
                "scope": p.scope,
                "status": p.status,
                "supersedes": p.supersedes,
                "similarity": score.similarities[i],
            }
            for i, p in enumerate(run.produced)
        ],
        "matches": [
            {"expected": m.expected, "produced": m.produced, "similarity": m.similarity, "fact": m.fact}
            for m in score.matches
        ],
        "misses": score.misses,
        "false_positives": score.false_positives,
        "supersedes": list(score.supersedes()),
        "wrong_supersedes": score.wrong_supersedes(),
        "secrets_stored": score.secrets_stored(),
        "ids": dict(run.ids),
    }


ROWS = (
    ("cases", "cases"),
    ("expected memories", "expected_memories"),
    ("produced memories", "produced_memories"),
    ("extraction precision", "precision"),
    ("extraction recall", "recall"),
    ("supersede detection", "supersede_detection"),
    ("wrong supersedes", "wrong_supersedes"),
    ("wrong-scope rate", "wrong_scope_rate"),
    ("wrong-kind rate", "wrong_kind_rate"),
    ("wrong-category rate", "wrong_category_rate"),
    ("links found", "links"),
    ("secrets stored", "secrets_stored"),
    ("'nothing' cases empty", "nothing"),
    ("failed jobs", "jobs_failed"),
    ("jobs per second", "jobs_per_second"),
    ("job seconds p50", "job_seconds_p50"),
    ("job seconds p95", "job_seconds_p95"),
    ("first attempt usable", "first_attempt_usable"),
    ("items rejected", "items_rejected"),
)


def table(summary: Mapping[str, Any]) -> str:
    """The printed table: one row per figure, a column for the whole set and each split."""
    columns = [("whole set", summary["all"]), *((name, summary["splits"][name]) for name in SPLITS)]
    lines = [f"{'':24}" + "".join(f"{name:>14}" for name, _ in columns)]
    for label, key in ROWS:
        cells = [_cell(figures, key) for _, figures in columns]
        lines.append(f"{label:24}" + "".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def _cell(figures: Mapping[str, Any], key: str) -> str:
    if key == "links":
        return f"{figures['links_found']}/{figures['links_expected']}"
    if key == "nothing":
        return f"{figures['nothing_correct']}/{figures['nothing_cases']}"
    if key == "supersede_detection" and figures[key] is not None:
        return f"{figures[key]:.2f} ({figures['supersedes_detected']}/{figures['supersedes_expected']})"
    if key == "jobs_per_second" and figures[key] is not None:
        return f"{figures[key]:.1f}"
    value = figures[key]
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def threshold_check(path: str | Path, threshold: float = MATCH_THRESHOLD) -> list[dict[str, Any]]:
    """Hand-labelled pairs (``{"expected", "produced", "label": "same"|"different", "values"?}``)
    with their cosine and whether scoring would match them: the hand check of ``MATCH_THRESHOLD``."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    texts = [r["expected"] for r in rows] + [r["produced"] for r in rows]
    vectors = embed_texts(texts, embedder=embedder_for_model(LOCAL_MODEL_NAME))
    checked = []
    for index, row in enumerate(rows):
        similarity = float(np.dot(vectors[index], vectors[len(rows) + index]))
        polarity = has_negation(row["expected"]) == has_negation(row["produced"])
        values = all(v.lower() in row["produced"].lower() for v in row.get("values", ()))
        matched = similarity >= threshold and polarity and values
        checked.append({**row, "similarity": round(similarity, 3), "matched": matched})
    return checked

"""Capture evaluation: hand-written conversations run through the real capture pipeline, scored by meaning.

Each case (format: ``evaluation/data/capture/README.md``) is run as a user's capture job would be: the
memories that exist before the turn are stored through ``memories.services``, the turn is
submitted through ``capture.services.capture_submit`` and the job is run in-process by
``capture.pipeline.run_job`` (what the Celery task calls), against the real database. The
memories the job wrote are then matched one-to-one to the expected ones *by meaning*: the
cosine similarity of their all-MiniLM vectors must reach ``MATCH_THRESHOLD``, both must say
the same about negation, and the memory must hold the expected item's ``values`` ("ruff",
"Munich") when it lists any. MiniLM puts "deploys on Fridays" next to "never deploys on
Fridays" (0.71) and "standup at 9:30" next to "standup at 10:15" (0.93): no threshold tells
an inverted memory or a wrong value from a paraphrase (``evaluation/data/capture/threshold_pairs.jsonl``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from capture import services
from capture.models import CaptureJob, JobStatus
from capture.pipeline import Outcome, run_job
from capture.proposals import KINDS, SCOPES
from memories.models import DEFAULT_TAXONOMY, Memory, MemoryEdge, Project
from memories.services import MemoryDraft, memory_create, project_get_or_create
from retrieval.embedders import LOCAL_MODEL_NAME, embedder_for_model
from retrieval.memory_vectors import embed_memories
from retrieval.vector_cache import embed_texts

# Checked by hand on 42 labelled pairs (evaluation/data/capture/threshold_pairs.jsonl, docs/adr/0011): at 0.65,
# 18 of 20 paraphrases match (the 2 others by negation wording) and 4 of 22 different facts do;
# at 0.7, 14 of 20 and 3 of 22.
MATCH_THRESHOLD = 0.65
SPLITS = ("tune", "heldout")
EVAL_TEAM = "eval-capture"
ACTOR = "system:eval-capture"
_NEGATION = re.compile(r"\b(?:not|no|never|nothing|none|neither|nor|cannot|no longer)\b|n't\b", re.IGNORECASE)


class CaseFormatError(ValueError):
    """A line of the cases file does not follow evaluation/data/capture/README.md."""


@dataclass(frozen=True)
class Expected:
    """A memory the turn should produce: any of ``facts`` in any wording, with these labels."""

    facts: tuple[str, ...]
    kinds: tuple[str, ...]
    categories: tuple[str, ...]
    scope: str
    supersedes: str | None = None
    links: tuple[str, ...] = ()
    key: str | None = None
    optional: bool = False
    values: tuple[str, ...] = ()  # words a match must contain (any case): the point of a change

    def accepts(self, content: str) -> bool:
        lowered = content.lower()
        return all(value.lower() in lowered for value in self.values)


@dataclass(frozen=True)
class Prior:
    """A memory that exists before the turn."""

    key: str
    content: str
    kind: str
    category: str
    scope: str = "user"


@dataclass(frozen=True)
class Case:
    id: str
    domain: str
    split: str
    messages: tuple[dict[str, Any], ...]
    expect: tuple[Expected, ...] = ()
    priors: tuple[Prior, ...] = ()
    secrets: tuple[str, ...] = ()
    chain: str | None = None
    note: str = ""

    @property
    def expects_nothing(self) -> bool:
        return not self.expect


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a JSONL file, checked: labels from the default taxonomy, keys that exist."""
    cases: list[Case] = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                cases.append(_case(json.loads(line)))
            except (KeyError, TypeError, ValueError) as error:
                raise CaseFormatError(f"{path}:{number}: {error}") from error
    _check_keys(cases)
    return cases


def _case(raw: Mapping[str, Any]) -> Case:
    case = Case(
        id=str(raw["id"]),
        domain=str(raw["domain"]),
        split=str(raw["split"]),
        messages=tuple(dict(m) for m in raw["messages"]),
        expect=tuple(_expected(item) for item in raw.get("expect", [])),
        priors=tuple(Prior(**prior) for prior in raw.get("priors", [])),
        secrets=tuple(str(s) for s in raw.get("secrets", [])),
        chain=raw.get("chain"),
        note=str(raw.get("note", "")),
    )
    if case.split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {case.split!r}")
    if not case.messages:
        raise ValueError("a case needs messages")
    for prior in case.priors:
        _check_labels((prior.kind,), (prior.category,), prior.scope)
    return case


def _expected(raw: Mapping[str, Any]) -> Expected:
    expected = Expected(
        facts=_strings(raw["fact"]),
        kinds=_strings(raw["kind"]),
        categories=_strings(raw["category"]),
        scope=str(raw["scope"]),
        supersedes=raw.get("supersedes"),
        links=tuple(raw.get("links", ())),
        key=raw.get("key"),
        optional=bool(raw.get("optional", False)),
        values=tuple(str(v) for v in raw.get("values", ())),
    )
    _check_labels(expected.kinds, expected.categories, expected.scope)
    return expected


def _strings(value: str | Sequence[str]) -> tuple[str, ...]:
    values = (value,) if isinstance(value, str) else tuple(value)
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ValueError(f"expected a non-empty string or list of strings, got {value!r}")
    return values


def _check_labels(kinds: Iterable[str], categories: Iterable[str], scope: str) -> None:
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
    for category in categories:
        if category not in DEFAULT_TAXONOMY:
            raise ValueError(f"unknown category {category!r}")
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")


def _check_keys(cases: Sequence[Case]) -> None:
    """Ids are unique; every supersedes/links key names a prior of the case or an earlier
    expected memory of the same chain."""
    seen_ids: set[str] = set()
    chain_keys: dict[str, set[str]] = {}
    for case in cases:
        if case.id in seen_ids:
            raise CaseFormatError(f"duplicate case id {case.id!r}")
        seen_ids.add(case.id)
        known = set(chain_keys.get(case.chain, set()) if case.chain else set()) | {p.key for p in case.priors}
        for item in case.expect:
            for key in (*([item.supersedes] if item.supersedes else []), *item.links):
                if key not in known:
                    raise CaseFormatError(f"{case.id}: unknown memory key {key!r}")
        if case.chain:
            chain_keys.setdefault(case.chain, set()).update(
                {p.key for p in case.priors} | {e.key for e in case.expect if e.key}
            )


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Produced:
    """A memory the job wrote, as scoring sees it."""

    memory_id: str
    content: str
    kind: str
    category: str
    scope: str
    status: str
    supersedes: str | None  # the predecessor, or under review the proposed one
    links: tuple[str, ...]
    stored_text: str  # everything stored with it that a secret could hide in

    @classmethod
    def of(cls, memory: Memory) -> Produced:
        supersedes = memory.supersedes_id or memory.metadata.get("proposed_supersedes")
        links = MemoryEdge.objects.filter(from_memory=memory, relationship="related")
        stored = [memory.content, json.dumps(memory.metadata), json.dumps(memory.source or {})]
        return cls(
            memory_id=str(memory.pk),
            content=memory.content,
            kind=memory.kind,
            category=memory.category,
            scope=memory.scope,
            status=memory.status,
            supersedes=str(supersedes) if supersedes else None,
            links=tuple(str(t) for t in links.values_list("to_memory_id", flat=True)),
            stored_text="\n".join(stored),
        )


@dataclass
class Run:
    """One case's run: what the job wrote and how it went."""

    case: Case
    produced: list[Produced]
    ids: dict[str, str]  # memory key -> memory id, for the case's priors and its chain so far
    seconds: float
    job_status: str
    job_error: str
    extractor: str
    attempts: int = 1  # more than one: an attempt failed (with an LLM, an answer with no usable JSON)
    items_rejected: int = 0  # proposed items validation refused (invented ids, labels off the taxonomy…)


def fresh_projects() -> None:
    """Delete the projects an earlier evaluation left behind (they live in their own team)."""
    # A successor protects its predecessor from deletion; the whole chain goes here.
    Memory.objects.filter(project__team__slug=EVAL_TEAM).update(supersedes=None)
    Project.objects.filter(team__slug=EVAL_TEAM).delete()


def run_cases(cases: Sequence[Case], *, policy: str = "auto", log: Callable[[str], None] = print) -> list[Run]:
    """Run every case in order; a chain's cases share one project and user, others get their own."""
    fresh_projects()
    runs: list[Run] = []
    chains: dict[str, tuple[Project, dict[str, str]]] = {}
    for number, case in enumerate(cases, 1):
        if case.chain and case.chain in chains:
            project, ids = chains[case.chain]
        else:
            project = project_get_or_create(slug=f"{EVAL_TEAM}-{number:03d}", team_slug=EVAL_TEAM)
            project.capture_policy = policy
            project.save(update_fields=["capture_policy"])
            ids = {}
            if case.chain:
                chains[case.chain] = (project, ids)
        runs.append(run_case(case, project=project, ids=ids))
        if number % 25 == 0:
            log(f"  {number}/{len(cases)} cases")
    return runs


def run_case(case: Case, *, project: Project, ids: dict[str, str]) -> Run:
    """Store the case's priors, submit its turn and run the job here, synchronously."""
    user_id = f"user-{case.chain or case.id}"
    for prior in case.priors:
        draft = MemoryDraft(
            user_id=user_id, content=prior.content, kind=prior.kind, category=prior.category, scope=prior.scope
        )
        ids[prior.key] = str(memory_create(project=project, draft=draft, actor=ACTOR, embed_inline=True).pk)
    started = time.perf_counter()
    job = services.capture_submit(
        project=project,
        user_id=user_id,
        session_id=case.id,
        trigger="turn",
        messages=case.messages,
        actor=ACTOR,
    )
    job = _run_to_the_end(str(job.pk))
    seconds = time.perf_counter() - started
    memories = list(Memory.objects.select_related("project").filter(pk__in=job.memory_ids).order_by("created_at"))
    # What the embedding task does in the background before the user's next turn.
    embed_memories([m for m in memories if m.embedding_status != "ready"])
    return Run(
        case=case,
        produced=[Produced.of(m) for m in memories],
        ids=ids,
        seconds=seconds,
        job_status=job.status,
        job_error=job.error,
        extractor=str(job.payload.get("extractor", "")),
        attempts=job.attempts,
        items_rejected=len(job.payload.get("rejected") or []),
    )


def _run_to_the_end(job_id: str, *, timeout: float = 600.0) -> CaptureJob:
    """Run the job as a worker would, retrying a transient failure at once (no back-off);
    if a worker process took the job first, wait for it."""
    deadline = time.monotonic() + timeout
    while True:
        result = run_job(job_id=job_id)
        job = CaptureJob.objects.get(pk=job_id)
        if job.status not in services.UNFINISHED or time.monotonic() > deadline:
            return job
        if result.outcome in (Outcome.BUSY, Outcome.SKIPPED):
            time.sleep(0.05)


# --- scoring ---------------------------------------------------------------------------------


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

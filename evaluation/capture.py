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
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capture import services
from capture.models import CaptureJob
from capture.pipeline import Outcome, run_job
from capture.proposals import KINDS, SCOPES
from memories.models import DEFAULT_TAXONOMY, Memory, MemoryEdge, Project
from memories.services import MemoryDraft, memory_create
from memories.tenancy import project_get_or_create
from retrieval.vectors.memory_vectors import embed_memories

SPLITS = ("tune", "heldout")
EVAL_TEAM = "eval-capture"
ACTOR = "system:eval-capture"


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

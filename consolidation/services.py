"""Writes of consolidation: queueing a run, running it, and deciding what it proposed.

A run (docs/adr/0093-consolidation.md) takes the end user's lock, compares the memories changed
since the user's watermark with all their current memories of the same scope (``vectors``),
judges each close pair (``rules``), and turns each merge or supersede into a
:class:`ConsolidationAction` under the project's capture policy: applied at once under ``auto``
(and under ``confidence`` from the project's threshold up), otherwise proposed in the review
queue, where a reviewer approves or rejects it. Every memory change goes through
``memories.consolidating`` (``memory_merge_into``, ``memory_supersede_existing``; undone by
``memory_unconsolidate``), so revisions record it and what rests on a retired memory returns to
review. A run never reads or writes another user's memories, and a pair once acted on (applied,
proposed, rejected or undone) is never acted on again: a second run changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from capture.services import policy_status
from common.errors import Conflict, DomainError
from common.locks import advisory_lock
from common.queue import publish
from consolidation import llm_judge, observations, proposals, reader, rules, selectors, vectors
from consolidation.models import (
    ActionKind,
    ActionStatus,
    ConsolidationAction,
    ConsolidationRun,
    ConsolidationState,
    RunStatus,
)
from memories import consolidating
from memories.models import Memory, Project, Status
from retrieval.vectors.memory_vectors import active_model

log = logging.getLogger(__name__)

# The names consolidation's tasks (``consolidation/tasks.py``) are registered and published under.
RUN_TASK = "consolidation.tasks.consolidation_run_task"
SCHEDULE_TASK = "consolidation.tasks.schedule_consolidations"
# pg_try_advisory_lock(namespace, hashtext(key)); capture's jobs use 4601.
LOCK_NAMESPACE = 4602
# A memory saved just before a run started may commit just after it read: the next run looks
# this far behind its watermark (the pairs it finds again are decided, so nothing repeats).
WATERMARK_OVERLAP = timedelta(seconds=60)
MAX_ATTEMPTS = 3
COUNTS = ("merged", "superseded", "kept", "proposed", *observations.COUNTS)


def user_lock(*, project_id: int, user_id: str) -> AbstractContextManager[bool]:
    """One consolidation run at a time per (project, user); yields whether the lock was taken."""
    return advisory_lock(LOCK_NAMESPACE, f"consolidate:{project_id}:{user_id}")


# --- queueing --------------------------------------------------------------------------------------


def consolidation_submit(
    *, project: Project, user_id: str, trigger: str, actor: str, queue: bool = True
) -> ConsolidationRun:
    """Queue a consolidation of ``user_id``'s memories; the run already waiting or running for
    them when there is one (asking twice runs once). Published to a worker once committed."""
    existing = selectors.unfinished_run(project=project, user_id=user_id)
    if existing is not None:
        return existing
    try:
        with transaction.atomic(durable=True):
            run = ConsolidationRun.objects.create(
                project=project, user_id=user_id, trigger=trigger, created_by=actor, counts=dict.fromkeys(COUNTS, 0)
            )
            if queue:
                transaction.on_commit(lambda: _queue(run.pk))
    except IntegrityError:  # another request queued one in the meantime
        existing = selectors.unfinished_run(project=project, user_id=user_id)
        if existing is None:
            raise
        return existing
    return run


def _queue(run_id: Any) -> None:
    publish(RUN_TASK, (str(run_id),), waiting=f"consolidation {run_id} waits for beat's re-queue")


def schedule_round(*, limit: int = 500) -> list[str]:
    """Beat's round: a run for every end user whose memories changed since their last one."""
    queued = []
    projects = {p.pk: p for p in Project.objects.all()}
    for project_id, user_id in selectors.users_to_consolidate(limit=limit):
        project = projects.get(project_id)
        if project is not None:
            run = consolidation_submit(project=project, user_id=user_id, trigger="schedule", actor="system:beat")
            queued.append(str(run.pk))
    return queued


def runs_requeue(*, queued_before: datetime, running_before: datetime, limit: int = 500) -> list[str]:
    """Publish again the runs a lost message or a dead worker left ``queued`` or ``running``."""
    ids = selectors.runs_to_requeue(queued_before=queued_before, running_before=running_before, limit=limit)
    if ids:
        ConsolidationRun.objects.filter(pk__in=ids).update(updated_at=timezone.now())
        for run_id in ids:
            _queue(run_id)
    return ids


# --- running ---------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What a run found: the verdicts to act on, how many pairs were judged distinct, how many
    memories it compared, and where the next run starts."""

    verdicts: list[Judged] = field(default_factory=list)
    kept: int = 0
    # The close pairs found and the memories compared: where observations are looked for.
    found: list[vectors.Candidate] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    compared: int = 0
    full: bool = False
    watermark: datetime | None = None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Judged:
    kind: str
    survivor: Memory
    retired: Memory
    confidence: float
    reason: str
    cosine: float

    @property
    def pair(self) -> str:
        return vectors.pair_key(str(self.survivor.pk), str(self.retired.pk))


def consolidation_run(*, run_id: str) -> str:
    """Run one queued run if it still needs running: ``done``, ``failed``, ``busy`` (another run of
    the user holds the lock: try later), ``retry`` or ``skipped``."""
    run = ConsolidationRun.objects.filter(pk=run_id).only("project_id", "user_id", "status").first()
    if run is None or run.status not in selectors.UNFINISHED:
        return "skipped"
    with user_lock(project_id=run.project_id, user_id=run.user_id) as acquired:
        if not acquired:
            return "busy"
        claimed = _claim(run_id)
        if claimed is None:
            return "skipped"
        try:
            _consolidate(claimed)
        except Exception as error:
            log.exception("consolidation %s failed", run_id)
            return _retry_or_fail(claimed, f"{type(error).__name__}: {error}")
    return "done"


def _claim(run_id: str) -> ConsolidationRun | None:
    with transaction.atomic(durable=True):
        run = ConsolidationRun.objects.select_for_update().select_related("project").filter(pk=run_id).first()
        if run is None or run.status not in selectors.UNFINISHED:
            return None
        if run.attempts >= MAX_ATTEMPTS:
            _finish(run, status=RunStatus.FAILED, error=f"gave up after {run.attempts} attempts; {run.error}")
            return None
        run.status, run.attempts, run.started_at = RunStatus.RUNNING, run.attempts + 1, timezone.now()
        run.save(update_fields=["status", "attempts", "started_at", "updated_at"])
    return run


def _retry_or_fail(run: ConsolidationRun, error: str) -> str:
    if run.attempts >= MAX_ATTEMPTS:
        _finish(run, status=RunStatus.FAILED, error=f"{error} (gave up after {run.attempts} attempts)")
        return "failed"
    run.status, run.error = RunStatus.QUEUED, f"{error} (attempt {run.attempts} of {MAX_ATTEMPTS}; will retry)"
    run.save(update_fields=["status", "error", "updated_at"])
    return "retry"


def _finish(run: ConsolidationRun, *, status: str, error: str = "") -> None:
    run.status, run.error, run.finished_at = status, error[:4000], timezone.now()
    fields = ["status", "error", "finished_at", "counts", "compared", "full", "since", "timings", "updated_at"]
    run.save(update_fields=fields)


def _consolidate(run: ConsolidationRun) -> None:
    started = timezone.now()
    state = selectors.state_of(project=run.project, user_id=run.user_id)
    since = state.watermark - WATERMARK_OVERLAP if state is not None else None
    plan = plan_run(project=run.project, user_id=run.user_id, since=since, now=started)
    clock = time.perf_counter()
    counts = apply_plan(run, plan)
    plan.timings["apply"] = round(time.perf_counter() - clock, 4)
    clock = time.perf_counter()
    retiring = {str(judged.retired.pk) for judged in plan.verdicts}
    counts |= observations.observe(run, found=plan.found, seeds=plan.seeds, retired=retiring)
    plan.timings["observe"] = round(time.perf_counter() - clock, 4)
    run.counts, run.compared, run.full, run.since = counts, plan.compared, plan.full, since
    run.timings = plan.timings
    with transaction.atomic(durable=True):
        ConsolidationState.objects.update_or_create(
            project=run.project, user_id=run.user_id, defaults={"watermark": plan.watermark or started, "last_run": run}
        )
        _finish(run, status=RunStatus.DONE)


def plan_run(*, project: Project, user_id: str, since: datetime | None, now: datetime) -> Plan:
    """Judge the pairs of ``user_id``'s memories changed after ``since`` (all, when None) with their
    nearest current memories of the same scope. Reads only."""
    plan = Plan(full=since is None)
    clock = time.perf_counter()
    current = selectors.active_ids(project=project, user_id=user_id)
    if since is None:
        changed = [memory_id for memory_id, _ in current]
    else:
        changed = selectors.changed_since(project=project, user_id=user_id, since=since)
    plan.timings["read"] = round(time.perf_counter() - clock, 4)
    plan.watermark = now
    if not changed:
        return plan
    clock = time.perf_counter()
    group = vectors.user_vectors(project=project, model=active_model(project), user_id=user_id)
    plan.timings["vectors"] = round(time.perf_counter() - clock, 4)
    # A memory not embedded yet is compared by the run after it is: the watermark waits for it.
    waiting = [memory_id for memory_id in changed if memory_id not in group.rows]
    if (oldest := selectors.oldest_unembedded(ids=waiting)) is not None:
        plan.watermark = min(now, oldest - timedelta(microseconds=1) + WATERMARK_OVERLAP)
    plan.compared = len(changed) - len(waiting)
    clock = time.perf_counter()
    found: list[vectors.Candidate] = []
    by_scope: dict[str, list[str]] = {}
    for memory_id, scope in current:
        by_scope.setdefault(scope, []).append(memory_id)
    changed_set = set(changed)
    for ids in by_scope.values():
        mine = [memory_id for memory_id in ids if memory_id in changed_set]
        found += vectors.candidates(group, current=ids, changed=mine, floor=rules.CANDIDATE_MIN_COSINE)
    plan.timings["pairs"] = round(time.perf_counter() - clock, 4)
    plan.found, plan.seeds = found, [memory_id for memory_id in changed if memory_id in group.rows]
    clock = time.perf_counter()
    plan.verdicts, plan.kept = judge_pairs(found)
    plan.timings["judge"] = round(time.perf_counter() - clock, 4)
    return plan


def judge_pairs(found: Sequence[vectors.Candidate]) -> tuple[list[Judged], int]:
    """The rules' verdict on each candidate pair: the merges and supersedes, and how many were kept."""
    memories = selectors.memories_for_judging(ids=list({i for c in found for i in (c.first, c.second)}))
    readings: dict[str, reader.Reading] = {}

    def reading(memory: Memory) -> reader.Reading:
        key = str(memory.pk)
        if key not in readings:
            readings[key] = reader.read(memory.content)
        return readings[key]

    judged: list[Judged] = []
    hard: list[tuple[Memory, Memory, float]] = []
    kept = 0
    ask_llm = llm_judge.enabled()
    for candidate in found:
        first, second = memories.get(candidate.first), memories.get(candidate.second)
        if first is None or second is None:
            continue
        older, newer = sorted((first, second), key=lambda m: (m.created_at, str(m.pk)))
        verdict = rules.judge(reading(older), reading(newer), candidate.cosine)
        if verdict.action == "keep":
            if ask_llm and llm_judge.is_hard(reading(older), reading(newer), candidate.cosine, verdict):
                hard.append((older, newer, candidate.cosine))
            else:
                kept += 1
            continue
        judged.append(_judged(verdict, older, newer, candidate.cosine, reading))
    # The pairs the rules could not tell apart, closest first, to the LLM when one is configured.
    hard.sort(key=lambda pair: -pair[2])
    decisions = llm_judge.decide([(older.content, newer.content) for older, newer, _ in hard]) if hard else []
    for (older, newer, cosine), decision in zip(hard, decisions, strict=True):
        if decision not in ("merge", "supersede"):
            kept += 1
            continue
        action: rules.Action = "merge" if decision == "merge" else "supersede"
        verdict = rules.Verdict(action, llm_judge.CONFIDENCE, f"decided by the LLM: {decision}")
        judged.append(_judged(verdict, older, newer, cosine, reading))
    return judged, kept


def _judged(
    verdict: rules.Verdict, older: Memory, newer: Memory, cosine: float, reading: Callable[[Memory], reader.Reading]
) -> Judged:
    if verdict.action == "merge":
        survivor = max((older, newer), key=lambda m: _completeness(m, reading(m)))
        retired = newer if survivor is older else older
    else:
        survivor, retired = newer, older
    return Judged(verdict.action, survivor, retired, verdict.confidence, verdict.reason, cosine)


def _completeness(memory: Memory, reading: reader.Reading) -> tuple[int, int, float]:
    """Which of two duplicates survives a merge: more history (a longer chain), then more said,
    then the older."""
    said = len(reading.words) + len(reading.names) + sum(len(v) for v in reading.values.values())
    return memory.version, said, -memory.created_at.timestamp()


def _order(judged: Judged) -> tuple[int, float, float, float]:
    """Merges first (surest first), then supersedes from the oldest change on; among changes of one
    memory, the nearest older statement first, so a chain forms oldest to newest."""
    if judged.kind == ActionKind.MERGE:
        return 0, -judged.confidence, 0.0, 0.0
    return 1, judged.survivor.created_at.timestamp(), -judged.retired.created_at.timestamp(), -judged.confidence


def apply_plan(run: ConsolidationRun, plan: Plan) -> dict[str, int]:
    """Turn the plan's verdicts into actions under the project's capture policy; the counts.

    An action applied at once is recorded after its memory change (one statement, as the change
    is one transaction of its own); proposals are recorded together at the end."""
    counts = dict.fromkeys(COUNTS, 0)
    counts["kept"] = plan.kept
    decided = selectors.decided_pairs(pairs=[j.pair for j in plan.verdicts])
    retired: set[str] = set()
    actor = f"consolidation:{run.pk}"
    proposals: list[ConsolidationAction] = []
    for judged in sorted(plan.verdicts, key=_order):
        survivor, gone = str(judged.survivor.pk), str(judged.retired.pk)
        if judged.pair in decided or survivor in retired or gone in retired:
            continue
        decided.add(judged.pair)
        retired.add(gone)
        action = ConsolidationAction(
            run=run,
            project=run.project,
            user_id=run.user_id,
            kind=judged.kind,
            survivor=judged.survivor,
            retired=judged.retired,
            pair=judged.pair,
            confidence=judged.confidence,
            reason=judged.reason,
            cosine=round(judged.cosine, 4),
            survivor_version=judged.survivor.version,
        )
        if policy_status(project=run.project, confidence=judged.confidence) != Status.ACTIVE:
            proposals.append(action)
            counts["proposed"] += 1
            continue
        note = _change_memories(action, actor=actor)
        action.status = ActionStatus.STALE if note else ActionStatus.APPLIED
        action.decided_by, action.decided_at, action.note = actor, timezone.now(), note
        action.save(force_insert=True)
        if not note:
            counts["merged" if judged.kind == ActionKind.MERGE else "superseded"] += 1
    ConsolidationAction.objects.bulk_create(proposals, ignore_conflicts=True)
    return counts


def _reason(action: ConsolidationAction) -> str:
    word = "merged" if action.kind == ActionKind.MERGE else "superseded"
    return f"consolidation: {word}: {action.reason} (confidence {action.confidence:.2f})"


def _change_memories(action: ConsolidationAction, *, actor: str) -> str:
    """Make the memory change an action names; "" when done, else why not (the memories changed
    since it was judged)."""
    try:
        if action.kind == ActionKind.MERGE:
            consolidating.memory_merge_into(
                survivor=action.survivor, merged=action.retired, actor=actor, reason=_reason(action)
            )
        else:
            consolidating.memory_supersede_existing(
                old=action.retired, new=action.survivor, actor=actor, reason=_reason(action)
            )
    except DomainError as error:
        return error.message
    return ""


# --- deciding proposals (the review queue) and undoing ---------------------------------------------


def action_approve(*, action: ConsolidationAction, actor: str) -> ConsolidationAction:
    """Apply a proposed merge or supersede (``proposals.approve``: Conflict when it was decided
    already or its memories changed since)."""
    proposals.approve(action, lambda: _change_memories(action, actor=actor), actor=actor, changed="these memories")
    return action


def action_reject(*, action: ConsolidationAction, actor: str) -> ConsolidationAction:
    """Reject a proposal: nothing changes, and the pair is not proposed again."""
    proposals.reject(action, actor=actor)
    return action


def action_undo(*, action: ConsolidationAction, actor: str, reopen: bool = False) -> ConsolidationAction:
    """Take back an applied merge or supersede (new revisions record it): the retired memory is
    current again. ``reopen``: the proposal waits for review again (the review queue's undo of an
    approval); otherwise the pair is left alone from now on. A rejection is reopened the same way.
    Conflict when the memories moved on since."""
    if action.status == ActionStatus.REJECTED and reopen:
        proposals.decide(action, status=ActionStatus.PROPOSED, actor=actor)
        return action
    if action.status != ActionStatus.APPLIED:
        raise Conflict("only an applied merge or supersede can be undone", code="not_applied")
    consolidating.memory_unconsolidate(
        survivor=action.survivor,
        retired=action.retired,
        version=action.survivor_version,
        actor=actor,
        reason=f"undo of consolidation {action.kind} ({action.reason})",
    )
    proposals.decide(action, status=ActionStatus.PROPOSED if reopen else ActionStatus.UNDONE, actor=actor)
    return action


def forget_cached_vectors() -> None:
    """Drop the vectors this process keeps between runs (to measure a run without them)."""
    vectors.forget_held()

"""Writes of the capture pipeline: accepting work (the outbox), claiming, recording, finishing.

``capture_submit`` and ``observation_submit`` store a :class:`CaptureJob` (and, for a durable
conversation, its messages) in one transaction and queue the Celery task on commit; the row
is the truth, the Celery message only a nudge (the sweeper re-queues what a lost message or
a dead worker left behind). Memories are written only through ``memories.services``, one
transaction per memory, each at most once per job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from capture import selectors
from capture.models import CaptureJob, JobStatus, Trigger
from capture.observations import prepare_step_output
from capture.proposals import ProposedMemory
from common import prepared
from common.errors import Conflict, Invalid, NotFound, PayloadTooLarge
from common.locks import advisory_lock
from common.queue import publish
from common.redaction import redact, redact_json
from conversations import selectors as conversation_selectors
from conversations import services as conversation_services
from conversations.window import clean_window
from memories.models import CapturePolicy, Memory, Project, Status
from memories.services import MemoryDraft, memory_create, memory_supersede
from retrieval.vectors.duplicates import NearDuplicateFinder

# The names capture's tasks (``capture/tasks.py``) are registered and published under.
CAPTURE_JOB_TASK = "capture.tasks.capture_job_task"
SWEEP_CAPTURE_JOBS_TASK = "capture.tasks.sweep_capture_jobs"

log = logging.getLogger(__name__)

UNFINISHED = (JobStatus.QUEUED, JobStatus.RUNNING)
# pg_try_advisory_lock(namespace, hashtext(key)): the namespace keeps our keys apart from
# any other advisory locks sharing the database.
LOCK_NAMESPACE = 4601
EXCERPT_CHARS = 200
LLM_EXTRACTORS = ("classifier", "observation-classifier")


# --- accepting work ------------------------------------------------------------------------


def capture_submit(
    *,
    project: Project,
    user_id: str,
    session_id: str,
    trigger: str,
    messages: Sequence[Mapping[str, Any]],
    actor: str,
    conversation_id: str | None = None,
) -> CaptureJob:
    """Accept a capture trigger: store the job (and messages) in one transaction, queue on commit.

    Without ``conversation_id`` the messages are the window and are stored on the job. With it,
    they are the turn's new messages: appended to that conversation, and the window is the
    conversation's tail. An older ``turn`` job of the same session that has not started is
    coalesced into this one (its window merged in); ``compaction`` jobs never are.
    """
    drafts = [conversation_services.message_draft(m) for m in messages]
    conversation_services.validate_messages(drafts)
    with transaction.atomic(durable=True):
        # The window is stored as the job's input: redacted like every stored message.
        conversation, window = None, [redact_json(dict(m)) for m in messages]
        if conversation_id is not None:
            conversation = conversation_selectors.conversation_get(
                project=project, user_id=user_id, conversation_id=conversation_id
            )
            conversation_services.messages_append(conversation=conversation, drafts=drafts)
            window = conversation_selectors.conversation_tail(
                conversation=conversation, limit=settings.MEMORYHUB_MAX_CAPTURE_MESSAGES, with_ids=True
            )
            session_id = session_id or conversation.session_id
        else:
            # What was said is kept as it was said: the session's messages are searched as
            # episodes, and each memory names the messages it came from.
            ids = conversation_services.session_messages_store(
                project=project, user_id=user_id, session_id=session_id, drafts=drafts
            )
            window = [{**entry, "message_id": message_id} for entry, message_id in zip(window, ids, strict=True)]
        job = CaptureJob.objects.create(
            project=project,
            user_id=user_id,
            conversation=conversation,
            session_id=session_id,
            trigger=trigger,
            window=window,
            created_by=actor,
        )
        if trigger == Trigger.TURN:
            _coalesce_into(job)
        transaction.on_commit(lambda: _queue(job.pk))
    return job


# The session's unstarted turn jobs other than the new one, oldest first, locked until the
# submitting transaction ends. Every turn capture asks and nearly always finds none: a prepared
# statement (``common.prepared``), without the ORM's query building, and the jobs are loaded only
# when there are some (capture ack, 2-core Intel: 1.12 -> 0.14-0.17 ms of CPU).
_OLDER_QUEUED_TURNS = f"""
SELECT id FROM {CaptureJob._meta.db_table}
WHERE project_id = %(project)s AND user_id = %(user)s AND session_id = %(session)s
  AND trigger = %(trigger)s AND status = %(status)s AND id <> %(job)s
ORDER BY created_at, id
FOR UPDATE
"""


def _coalesce_into(job: CaptureJob) -> None:
    """Fold the session's unstarted turn jobs into ``job``: their windows join its window."""
    with prepared.cursor() as cursor:
        cursor.execute(
            _OLDER_QUEUED_TURNS,
            {
                "project": job.project_id,
                "user": job.user_id,
                "session": job.session_id,
                "trigger": Trigger.TURN.value,
                "status": JobStatus.QUEUED.value,
                "job": job.pk,
            },
        )
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return
    older = sorted(CaptureJob.objects.filter(pk__in=ids), key=lambda previous: ids.index(previous.pk))
    window: list[dict[str, Any]] = []
    for previous in [*older, job]:
        window = merge_windows(window, previous.window)
    job.window = window[-settings.MEMORYHUB_MAX_CAPTURE_MESSAGES :]
    job.payload = {**job.payload, "coalesced": [str(p.pk) for p in older]}
    job.save(update_fields=["window", "payload", "updated_at"])
    CaptureJob.objects.filter(pk__in=[p.pk for p in older]).update(
        status=JobStatus.COALESCED, coalesced_into=job, finished_at=timezone.now(), updated_at=timezone.now()
    )


def merge_windows(older: Sequence[Mapping[str, Any]], newer: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One window holding both: ``newer`` when it already repeats ``older`` (agents usually send
    the whole window every turn), else ``older`` plus what ``newer`` adds after their overlap."""
    old_keys, new_keys = [_message_key(m) for m in older], [_message_key(m) for m in newer]
    span = len(old_keys)
    if any(new_keys[i : i + span] == old_keys for i in range(len(new_keys) - span + 1)):
        return [dict(m) for m in newer]
    for size in range(min(len(old_keys), len(new_keys)), 0, -1):
        if old_keys[-size:] == new_keys[:size]:
            return [dict(m) for m in [*older, *newer[size:]]]
    return [dict(m) for m in [*older, *newer]]


def _message_key(message: Mapping[str, Any]) -> tuple[str, str]:
    return str(message.get("role")), repr(message.get("content"))


def observation_submit(
    *, project: Project, user_id: str, step_name: str, step_type: str, output: str, actor: str, session_id: str = ""
) -> CaptureJob:
    """Accept an agent step's output for FIL extraction; outputs under 50 characters are
    recorded as a finished job with nothing extracted, over 4,000 are cut."""
    if len(output) > settings.MEMORYHUB_MAX_MESSAGE_CHARS:
        raise PayloadTooLarge(
            f"output has {len(output)} characters; the limit is {settings.MEMORYHUB_MAX_MESSAGE_CHARS}",
            code="output_too_large",
        )
    output, step_name = redact(output)[0], redact(step_name)[0]  # no secret is stored in a payload
    text = prepare_step_output(output)
    payload: dict[str, Any] = {"step_name": step_name, "step_type": step_type, "output": text or output.strip()}
    if text is None:
        payload["skipped"] = "output shorter than 50 characters: nothing to extract"
    with transaction.atomic(durable=True):
        job = CaptureJob.objects.create(
            project=project,
            user_id=user_id,
            session_id=session_id,
            trigger=Trigger.OBSERVATION,
            payload=payload,
            status=JobStatus.QUEUED if text else JobStatus.DONE,
            finished_at=None if text else timezone.now(),
            created_by=actor,
        )
        if text:
            transaction.on_commit(lambda: _queue(job.pk))
    return job


def _queue(job_id: Any) -> None:
    """Nudge a worker about a capture job. No publish retries: the request must not wait for a
    broker that is down; the job row stays ``queued`` and the sweeper queues it later."""
    publish(CAPTURE_JOB_TASK, (str(job_id),), waiting=f"capture job {job_id} waits for the sweeper")


# --- running a job ---------------------------------------------------------------------------


def user_lock(*, project_id: int, user_id: str) -> AbstractContextManager[bool]:
    """One capture job at a time per (project, user); yields whether the lock was taken."""
    return advisory_lock(LOCK_NAMESPACE, f"capture:{project_id}:{user_id}")


def capture_job_claim(*, job_id: str) -> CaptureJob | None:
    """Mark an unfinished job ``running`` (attempts + 1); ``None`` when there is nothing to run.

    A job that has used up its attempts (e.g. it killed its worker each time) is failed here.
    Call it holding the user's lock: a ``running`` job is then known to be abandoned.
    """
    with transaction.atomic(durable=True):
        job = CaptureJob.objects.select_for_update().select_related("project").filter(pk=job_id).first()
        if job is None or job.status not in UNFINISHED:
            return None
        limit = settings.MEMORYHUB_CAPTURE_MAX_ATTEMPTS
        if job.attempts >= limit:
            reason = "; ".join(part for part in (f"gave up after {job.attempts} attempts", job.error) if part)
            _finish(job, status=JobStatus.FAILED, error=reason)
            return None
        job.status, job.attempts, job.started_at = JobStatus.RUNNING, job.attempts + 1, timezone.now()
        job.save(update_fields=["status", "attempts", "started_at", "updated_at"])
    return job


def capture_job_record_extraction(*, job: CaptureJob, extraction: Any) -> CaptureJob:
    """Store the proposals before writing any: a re-run applies them instead of asking again."""
    job.proposals = [{**p.as_dict(), "outcome": "pending"} for p in extraction.proposals]
    job.payload = {
        **job.payload,
        "extractor": extraction.extractor,
        "rejected": [{"item": _short(item), "reason": why} for item, why in extraction.rejected],
    }
    job.save(update_fields=["proposals", "payload", "updated_at"])
    return job


def _short(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v[:EXCERPT_CHARS] if isinstance(v, str) else v) for k, v in list(item.items())[:12]}


def capture_job_write_memories(*, job: CaptureJob) -> CaptureJob:
    """Write each pending proposal (skipping duplicates), then mark the job ``done``."""
    finder = NearDuplicateFinder(project=job.project, user_id=job.user_id)
    items = list(job.proposals)
    for index, item in enumerate(items):
        if item.get("outcome") != "pending":
            continue
        items[index] = {**item, **_write_one(job, item, finder)}
        # Progress doubles as a heartbeat: a long job is not mistaken for a stuck one.
        CaptureJob.objects.filter(pk=job.pk).update(proposals=items, updated_at=timezone.now())
    job.proposals = items
    failed = [f"{i['content'][:60]!r}: {i['detail']}" for i in items if i["outcome"] == "failed"]
    notes = [finder.skipped] if finder.skipped else []
    error = "; ".join([*(f"not written {f}" for f in failed), *notes])
    job.memory_ids = [i["memory_id"] for i in items if i["outcome"] == "created"]
    _finish(job, status=JobStatus.DONE, error=error)
    return job


def _write_one(job: CaptureJob, item: Mapping[str, Any], finder: NearDuplicateFinder) -> dict[str, Any]:
    """Write one proposal and say what happened: created, duplicate, near_duplicate or failed."""
    proposal = proposal_from(item)
    # Only a re-run can find memories of its own: an earlier attempt wrote them before dying.
    mine = selectors.memory_written_by_job(job=job, content=proposal.content) if job.attempts > 1 else None
    if mine is not None:
        return {"outcome": "created", "memory_id": str(mine.pk), "status": mine.status, "detail": ""}
    same = selectors.exact_duplicate(project=job.project, user_id=job.user_id, content=proposal.content)
    if same is not None:
        return {"outcome": "duplicate", "memory_id": str(same.pk), "detail": "same content as an existing memory"}
    near = finder.find(proposal.content)
    # A successor is close to the memory it replaces by nature ("uses black" -> "uses ruff").
    if near is not None and near.memory_id != proposal.supersedes:
        detail = f"cosine similarity {near.similarity:.3f} to an existing memory"
        return {"outcome": "near_duplicate", "memory_id": near.memory_id, "detail": detail}
    try:
        memory, detail = _store(job, proposal)
    except (Invalid, PayloadTooLarge, Conflict, NotFound) as error:
        return {"outcome": "failed", "memory_id": None, "detail": error.message}
    return {"outcome": "created", "memory_id": str(memory.pk), "status": memory.status, "detail": detail}


def proposal_from(item: Mapping[str, Any]) -> ProposedMemory:
    fields = {k: item[k] for k in ProposedMemory.__dataclass_fields__ if k in item}
    fields["related"] = tuple(fields.get("related") or ())
    return ProposedMemory(**fields)


def policy_status(*, project: Project, confidence: float) -> str:
    """``active`` or ``pending_review`` under the project's capture policy."""
    if project.capture_policy == CapturePolicy.REVIEW:
        return Status.PENDING_REVIEW
    if project.capture_policy == CapturePolicy.CONFIDENCE and confidence < project.auto_approve_confidence:
        return Status.PENDING_REVIEW
    return Status.ACTIVE


def _store(job: CaptureJob, proposal: ProposedMemory) -> tuple[Memory, str]:
    """Write ``proposal``; returns the memory and a note on what of the proposal was not applied.

    The extractor saw the user's memories a while ago: one it links to may have been deleted
    since, and one it supersedes deleted, archived or superseded. Such targets are dropped
    (the memory is then written as a plain new one) rather than failing the whole item.
    """
    status = policy_status(project=job.project, confidence=proposal.confidence)
    extractor = str(job.payload.get("extractor", ""))
    actor = f"{'classifier' if extractor in LLM_EXTRACTORS else 'rules'}:{job.pk}"
    draft = memory_draft(job, proposal)
    related = selectors.still_visible(project=job.project, user_id=job.user_id, memory_ids=proposal.related)
    draft.related = [(memory_id, "related") for memory_id in related]
    old = None
    if proposal.supersedes:
        old = selectors.live_head(project=job.project, user_id=job.user_id, memory_id=proposal.supersedes)
    notes = []
    if proposal.supersedes and old is None:
        notes.append(f"written as a new memory: {proposal.supersedes} was superseded, archived or deleted since")
    if gone := [memory_id for memory_id in proposal.related if memory_id not in related]:
        notes.append(f"not linked to {', '.join(gone)}: deleted since")
    if old is not None and status == Status.ACTIVE:
        draft.scope = old.scope  # a successor keeps its predecessor's scope
        memory = memory_supersede(memory=old, draft=draft, actor=actor, reason=proposal.reason)
    else:
        if old is not None:
            # Superseding takes effect on approval; until then the proposal only records it.
            draft.metadata["proposed_supersedes"] = proposal.supersedes
        memory = memory_create(project=job.project, draft=draft, actor=actor, status=status, embed_inline=False)
    return memory, "; ".join(notes)


def memory_draft(job: CaptureJob, proposal: ProposedMemory) -> MemoryDraft:
    """The memory a proposal becomes, with where it came from (``source``) and why (``metadata``)."""
    metadata = {"confidence": proposal.confidence, "reason": proposal.reason, "evidence": proposal.evidence}
    if proposal.event_date:
        metadata["event_date"] = proposal.event_date
    return MemoryDraft(
        user_id=job.user_id,
        content=proposal.content,
        kind=proposal.kind,
        category=proposal.category,
        scope=proposal.scope,
        importance=proposal.importance,
        metadata={**metadata, "extractor": job.payload.get("extractor", "")},
        source=memory_source(job, proposal),
        related=[(memory_id, "related") for memory_id in proposal.related],
    )


def memory_source(job: CaptureJob, proposal: ProposedMemory) -> dict[str, Any]:
    if job.trigger == Trigger.OBSERVATION:
        step = {"step_name": job.payload.get("step_name", ""), "step_type": job.payload.get("step_type", "")}
        return {**step, "capture_job": str(job.pk)}
    return {
        "capture_job": str(job.pk),
        "conversation": str(job.conversation_id) if job.conversation_id else None,
        "session_id": job.session_id,
        "trigger": job.trigger,
        "extractor": job.payload.get("extractor", ""),
        "excerpt": proposal.evidence[:EXCERPT_CHARS] or _last_user_text(job),
        "messages": source_messages(clean_window(job.window), proposal.evidence),
    }


def source_messages(window: Sequence[Mapping[str, str]], evidence: str) -> list[dict[str, str]]:
    """The stored message a memory came from: the one holding its evidence (the sentence the
    extractor read), else the user message sharing most of its words; [] when none is stored."""
    stored = [m for m in window if m.get("message_id")]
    said = [m for m in stored if m["role"] == "user"] or stored
    needle = _plain(evidence.rstrip("…"))
    found = next((m for m in said if needle and needle in _plain(m["content"])), None)
    if found is None and said:
        words = set(needle.split())
        overlap, best = max(((len(words & set(_plain(m["content"]).split())), i) for i, m in enumerate(said)))
        found = said[best] if overlap else None
    if found is None:
        return []
    reference = {"id": found["message_id"]}
    if found.get("correlation_id"):
        reference["correlation_id"] = found["correlation_id"]
    return [reference]


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w']+", " ", text.casefold()).split())


def _last_user_text(job: CaptureJob) -> str:
    users = [m["content"] for m in clean_window(job.window) if m["role"] == "user"]
    return redact(users[-1][:EXCERPT_CHARS])[0] if users else ""


def capture_job_retry_or_fail(*, job: CaptureJob, error: str) -> CaptureJob:
    """After a failed attempt: back to ``queued`` while attempts remain, else ``failed``."""
    limit = settings.MEMORYHUB_CAPTURE_MAX_ATTEMPTS
    if job.attempts >= limit:
        _finish(job, status=JobStatus.FAILED, error=f"{error} (gave up after {job.attempts} attempts)")
    else:
        job.status, job.error = JobStatus.QUEUED, f"{error} (attempt {job.attempts} of {limit}; will retry)"
        job.save(update_fields=["status", "error", "updated_at"])
    return job


def _finish(job: CaptureJob, *, status: str, error: str) -> None:
    job.status, job.error, job.finished_at = status, error[:4000], timezone.now()
    job.save(update_fields=["status", "error", "finished_at", "memory_ids", "proposals", "updated_at"])


def capture_job_retry(*, job: CaptureJob) -> CaptureJob:
    """Give a failed job a fresh start (the curation UI's retry): ``queued`` with its attempts
    reset, queued once the change commits (the sweeper catches it if the broker is down)."""
    with transaction.atomic(durable=True):
        job = CaptureJob.objects.select_for_update().get(pk=job.pk)
        if job.status != JobStatus.FAILED:
            raise Conflict("only failed capture jobs can be retried", code="not_failed")
        job.status, job.attempts, job.error, job.finished_at = JobStatus.QUEUED, 0, "", None
        job.save(update_fields=["status", "attempts", "error", "finished_at", "updated_at"])
        transaction.on_commit(lambda: _queue(job.pk))
    return job


def capture_jobs_requeue(*, queued_before: datetime, running_before: datetime, limit: int = 500) -> list[str]:
    """Queue again the jobs stuck in ``queued``/``running`` (the sweeper). Returns their ids.

    Touching ``updated_at`` makes the next sweep wait a full timeout before queueing them again.
    """
    ids = selectors.jobs_to_requeue(queued_before=queued_before, running_before=running_before, limit=limit)
    if ids:
        CaptureJob.objects.filter(pk__in=ids).update(updated_at=timezone.now())
        for job_id in ids:
            _queue(job_id)
    return ids

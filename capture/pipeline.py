"""Capture orchestration: which extractor runs on a job, and one job's run from claim to done.

The extractors themselves are pure modules (``classifier``, ``rules``, ``observations``);
database writes are ``capture.services``. This module decides the order:

1. take the per-user lock (one classification at a time per project and user);
2. claim the job (``queued``/``running`` -> ``running``, attempts + 1);
3. extract proposals unless an earlier attempt already stored them: the LLM classifier when
   an LLM is configured, else the rule-based extractor; observation jobs use the FIL
   extractors. Every proposal is validated against the project's taxonomy;
4. write the proposals one by one (``services.capture_job_write_memories``), each in its own
   transaction and each at most once, then mark the job done.

An LLM failure or unusable output puts the job back to ``queued`` until
``MEMORYHUB_CAPTURE_MAX_ATTEMPTS`` is reached, then ``failed``.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from capture import selectors, services
from capture.changes import Known
from capture.classifier import (
    ClassifierOutputError,
    build_classifier_messages,
    classifier_schema,
    parse_classifier_output,
    validate_items,
)
from capture.models import CaptureJob, JobStatus, Trigger
from capture.observations import build_observation_messages, extract_observations, parse_observation_output
from capture.proposals import ProposedMemory
from capture.rules import dated, extract_from_window, is_personal
from conversations.dates import said_on
from conversations.window import clean_window
from retrieval.embedding.protocol import EmbedderError
from retrieval.llm import LLMError, complete, llm_configured
from retrieval.vectors.duplicates import NearDuplicateFinder
from retrieval.vectors.message_vectors import embed_messages

log = logging.getLogger(__name__)

CLASSIFIER_MAX_TOKENS = 1500
# The rule path's last resort for "I don't drive to work anymore": the memory nearest to "the
# user drives to work" is the one replaced when at least this close ("eats meat" vs "is
# vegetarian" 0.78; "drives to work" vs "commutes by car" 0.59 is left to the words rule).
RULES_SUPERSEDE_SIMILARITY = 0.6


class TransientCaptureError(Exception):
    """The extractor could not answer this time (LLM down, timed out, garbage): try again later."""


@dataclass(frozen=True)
class Extraction:
    """What an extractor proposed, what validation rejected, and which extractor it was."""

    extractor: str
    proposals: list[ProposedMemory] = field(default_factory=list)
    rejected: list[tuple[dict[str, Any], str]] = field(default_factory=list)


class Outcome(enum.StrEnum):
    DONE = "done"
    SKIPPED = "skipped"  # gone, finished or coalesced: nothing to do
    BUSY = "busy"  # another job of the same user holds the lock
    RETRY = "retry"
    FAILED = "failed"


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    attempts: int = 0


def run_job(*, job_id: str) -> RunResult:
    """Run one capture job if it still needs running; see the module docstring."""
    job = CaptureJob.objects.filter(pk=job_id).only("project_id", "user_id", "status").first()
    if job is None or job.status not in services.UNFINISHED:
        return RunResult(Outcome.SKIPPED)
    with services.user_lock(project_id=job.project_id, user_id=job.user_id) as acquired:
        if not acquired:
            return RunResult(Outcome.BUSY)
        claimed = services.capture_job_claim(job_id=job_id)
        if claimed is None:
            return RunResult(Outcome.SKIPPED)
        return _run_claimed(claimed)


def _run_claimed(job: CaptureJob) -> RunResult:
    _embed_episodes(job)
    try:
        if not job.payload.get("extractor"):
            job = services.capture_job_record_extraction(job=job, extraction=extract(job))
        job = services.capture_job_write_memories(job=job)
    except TransientCaptureError as error:
        job = services.capture_job_retry_or_fail(job=job, error=str(error))
    except Exception as error:
        # A bug or an outage mid-job: keep the job retryable (within its attempts), say why.
        log.exception("capture job %s failed", job.pk)
        job = services.capture_job_retry_or_fail(job=job, error=f"{type(error).__name__}: {error}")
    if job.status == JobStatus.DONE:
        return RunResult(Outcome.DONE, job.attempts)
    outcome = Outcome.FAILED if job.status == JobStatus.FAILED else Outcome.RETRY
    return RunResult(outcome, job.attempts)


def _embed_episodes(job: CaptureJob) -> None:
    """Embed the window's stored messages now, so they are found as episodes once the job is
    done; on failure the message sweeper embeds them later (the job goes on)."""
    ids = [str(m["message_id"]) for m in job.window if isinstance(m, dict) and m.get("message_id")]
    if not ids:
        return
    try:
        embed_messages(message_ids=ids)
    except (EmbedderError, DatabaseError) as error:
        log.warning("capture job %s: its messages wait for the sweeper's embedding: %s", job.pk, error)


# --- extraction ------------------------------------------------------------------------


def extract(job: CaptureJob) -> Extraction:
    """Proposals for ``job`` from the extractor that applies, validated against the taxonomy."""
    if job.trigger == Trigger.OBSERVATION:
        return _from_observation(job)
    window = clean_window(job.window, max_chars=settings.MEMORYHUB_CAPTURE_WINDOW_CHARS)
    if not window:
        return Extraction("none")
    if not llm_configured():
        return _from_rules(job, window)
    existing = selectors.memories_for_classifier(
        project=job.project, user_id=job.user_id, limit=settings.MEMORYHUB_CAPTURE_EXISTING_LIMIT
    )
    messages = build_classifier_messages(
        window=window,
        existing=[(str(m.pk), m.category, m.content) for m in existing],
        taxonomy=job.project.taxonomy,
    )
    visible_ids = {str(m.pk) for m in existing}
    schema = classifier_schema(taxonomy=job.project.taxonomy, visible_ids=visible_ids)
    try:
        items = parse_classifier_output(_ask_llm(messages, json_schema=schema))
    except ClassifierOutputError as error:
        raise TransientCaptureError(f"classifier output unusable: {error}") from error
    accepted, rejected = validate_items(items, taxonomy=job.project.taxonomy, visible_ids=visible_ids)
    said = said_on(next((m["timestamp"] for m in reversed(window) if m.get("timestamp")), None), job.created_at.date())
    return Extraction("classifier", [personal_stays_personal(dated(p, said), job) for p in accepted], rejected)


def personal_stays_personal(proposal: ProposedMemory, job: CaptureJob) -> ProposedMemory:
    """A fact about the speaker's own person or household is theirs alone, whatever the model said."""
    if proposal.scope != "project" or not is_personal(proposal.content):
        return proposal
    category = "user-facts" if "user-facts" in job.project.taxonomy else proposal.category
    return dataclasses.replace(proposal, scope="user", category=category)


def _from_rules(job: CaptureJob, window: list[dict[str, str]]) -> Extraction:
    """The rule-based extractor, given the user's live memories so a change of mind supersedes one."""
    existing = selectors.memories_for_classifier(
        project=job.project, user_id=job.user_id, limit=settings.MEMORYHUB_CAPTURE_EXISTING_LIMIT
    )
    known = [Known(str(m.pk), m.content, m.kind, m.category, m.scope) for m in existing]
    finder = NearDuplicateFinder(project=job.project, user_id=job.user_id, threshold=RULES_SUPERSEDE_SIMILARITY)

    def nearest(text: str) -> str | None:
        hit = finder.find(text)
        return None if hit is None else hit.memory_id

    proposals = extract_from_window(
        window, existing=known, nearest=nearest if known else None, today=job.created_at.date()
    )
    return _validated("rules", proposals, job, visible_ids=[k.id for k in known])


def _from_observation(job: CaptureJob) -> Extraction:
    step_name, step_type = str(job.payload.get("step_name", "")), str(job.payload.get("step_type", ""))
    output = str(job.payload.get("output", ""))
    if not llm_configured():
        proposals = extract_observations(step_name=step_name, step_type=step_type, output=output)
        return _validated("observation-rules", proposals, job)
    try:
        text = _ask_llm(build_observation_messages(step_name, step_type, output))
        proposals = parse_observation_output(text, step_name=step_name, step_type=step_type)
    except ClassifierOutputError as error:
        raise TransientCaptureError(f"observation output unusable: {error}") from error
    return _validated("observation-classifier", proposals, job)


def _validated(
    extractor: str, proposals: Sequence[ProposedMemory], job: CaptureJob, visible_ids: Sequence[str] = ()
) -> Extraction:
    """Re-check proposals against the project's own taxonomy (the extractors use the default one)."""
    items = [p.as_dict() for p in proposals]
    accepted, rejected = validate_items(items, taxonomy=job.project.taxonomy, visible_ids=visible_ids)
    return Extraction(extractor, accepted, rejected)


def _ask_llm(messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None) -> str:
    try:
        return complete(
            messages,
            model=settings.MEMORYHUB_LLM_MODEL,
            timeout=settings.MEMORYHUB_CAPTURE_LLM_TIMEOUT,
            max_tokens=CLASSIFIER_MAX_TOKENS,
            json_schema=json_schema,
            schema_name="memories",
        )
    except LLMError as error:
        raise TransientCaptureError(str(error)) from error

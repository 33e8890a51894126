"""Consolidation's rows: a run per end user (the job the API reports on), the watermark each
user's next run starts from, and every merge or supersede a run proposed or applied."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ConsolidationRun(models.Model):
    """One consolidation of one end user's memories: queued by beat, the API or the UI, run by a
    worker. The row is the truth; the Celery message a nudge (beat re-queues a lost one)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="consolidation_runs")
    user_id = models.CharField(max_length=255)
    # What asked for it: "schedule" (beat), "api", "ui", "eval".
    trigger = models.CharField(max_length=20)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # Applied merges and supersedes, proposals left for review, pairs judged distinct; observations
    # applied, left for review, and groups the LLM was asked about (consolidation/observations.py).
    counts = models.JSONField(default=dict, blank=True)
    # Memories compared (those changed since the watermark), and whether that was all of them.
    compared = models.PositiveIntegerField(default=0)
    full = models.BooleanField(default=False)
    since = models.DateTimeField(null=True, blank=True)
    # Seconds per stage of the run (read, vectors, pairs, judge, apply, observe).
    timings = models.JSONField(default=dict, blank=True)
    created_by = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "user_id", "-created_at"], name="consolidation_user_runs"),
            models.Index(
                fields=["status", "updated_at"],
                name="consolidation_unfinished",
                condition=Q(status__in=["queued", "running"]),
            ),
        ]
        constraints = [
            # One unfinished run per end user: asking again while one waits answers that one.
            models.UniqueConstraint(
                fields=["project", "user_id"],
                condition=Q(status__in=["queued", "running"]),
                name="consolidation_one_unfinished_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"consolidation {self.id} of {self.user_id} ({self.status})"


class ConsolidationState(models.Model):
    """Where an end user's next run starts: memories changed after ``watermark`` (less a minute's
    overlap for transactions that were still committing) are compared against all active ones."""

    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)
    watermark = models.DateTimeField()
    last_run = models.ForeignKey(ConsolidationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user_id"], name="consolidation_state_unique_user")]

    def __str__(self) -> str:
        return f"{self.user_id} consolidated up to {self.watermark}"


class ActionKind(models.TextChoices):
    MERGE = "merge"
    SUPERSEDE = "supersede"


class ActionStatus(models.TextChoices):
    PROPOSED = "proposed"  # waiting in the review queue
    APPLIED = "applied"
    REJECTED = "rejected"  # by a reviewer: never proposed again
    UNDONE = "undone"  # applied, then taken back: never proposed again
    STALE = "stale"  # the memories changed before it could be applied


class Proposal(models.Model):
    """What a run proposes for one end user, and how the review queue decided it
    (``consolidation.proposals``): merges and supersedes (``ConsolidationAction``) and
    observations (``ConsolidationObservation``)."""

    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)
    confidence = models.FloatField()
    reason = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=ActionStatus.choices, default=ActionStatus.PROPOSED)
    decided_by = models.CharField(max_length=255, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class ConsolidationAction(Proposal):
    """A merge or supersede of two memories of one end user, as a run judged it.

    ``retired`` is the memory that stops being current (merged into, or superseded by,
    ``survivor``). One row per pair of memories, ever (``pair``): a pair a reviewer rejected or
    an undo took back is not proposed again, and a second run finds every pair decided."""

    run = models.ForeignKey(ConsolidationRun, on_delete=models.CASCADE, related_name="actions")
    kind = models.CharField(max_length=20, choices=ActionKind.choices)
    survivor = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="+")
    retired = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="+")
    pair = models.CharField(max_length=80, unique=True)
    cosine = models.FloatField(null=True, blank=True)
    # The survivor's version before the action (an undo gives it back).
    survivor_version = models.PositiveIntegerField(default=1)

    class Meta:
        indexes = [
            models.Index(
                fields=["project", "status", "created_at"],
                name="consolidation_proposals",
                condition=Q(status="proposed"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.retired_id} -> {self.survivor_id} ({self.status})"


class ConsolidationObservation(Proposal):
    """A short statement the LLM synthesised from several memories of one end user, citing them
    (docs/adr/0110-consolidation-observations.md).

    Proposed in the review queue or applied at once, under the capture policy as merges are.
    Applied, it is ``memory``: a memory of kind ``observation`` linked ``derived_from`` to each
    cited memory, so when one of them stops being current the observation returns to review
    (docs/adr/0094-dependent-invalidation.md). ``key`` names the set of cited memories: a set
    once proposed is never proposed again, whatever became of it."""

    run = models.ForeignKey(ConsolidationRun, on_delete=models.CASCADE, related_name="observations")
    content = models.TextField()
    # The ids of the cited memories, sorted (the edges are written only when it is applied).
    cited = models.JSONField(default=list)
    key = models.CharField(max_length=64, unique=True)
    memory = models.ForeignKey("memories.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        indexes = [
            models.Index(
                fields=["project", "user_id", "created_at"],
                name="consolidation_observations",
                condition=Q(status="proposed"),
            ),
        ]

    def __str__(self) -> str:
        return f"observation of {self.user_id} citing {len(self.cited)} ({self.status})"

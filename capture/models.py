"""Capture jobs: the outbox rows that drive background classification."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class Trigger(models.TextChoices):
    TURN = "turn"
    COMPACTION = "compaction"
    OBSERVATION = "observation"


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    COALESCED = "coalesced"


class CaptureJob(models.Model):
    """One unit of capture work, written in the same transaction as its messages.

    The row is the source of truth; the Celery message is only a nudge. A sweeper
    re-queues rows stuck in ``queued`` or ``running``, so a lost message loses nothing.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="capture_jobs")
    user_id = models.CharField(max_length=255)
    conversation = models.ForeignKey(
        "conversations.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="capture_jobs"
    )
    session_id = models.CharField(max_length=255, blank=True, default="")
    trigger = models.CharField(max_length=20, choices=Trigger.choices)
    window = models.JSONField(default=list)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=JobStatus.choices, default=JobStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    memory_ids = models.JSONField(default=list, blank=True)
    proposals = models.JSONField(default=list, blank=True)
    coalesced_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    created_by = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "user_id", "status", "created_at"], name="capturejob_user_queue"),
            models.Index(
                fields=["status", "updated_at"],
                name="capturejob_unfinished",
                condition=Q(status__in=["queued", "running"]),
            ),
            models.Index(fields=["project", "-created_at"], name="capturejob_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.trigger} job {self.id} ({self.status})"

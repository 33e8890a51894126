"""Retrieval's own data: the audit log of every retrieve call."""

from __future__ import annotations

from django.db import models


class RetrievalLog(models.Model):
    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="retrieval_logs")
    user_id = models.CharField(max_length=255)
    correlation_id = models.CharField(max_length=64)
    # Only a hash of the query: the log must not become a second copy of conversations.
    query_hash = models.CharField(max_length=64)
    result_count = models.PositiveIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    latency_ms = models.FloatField()
    degraded = models.JSONField(default=list, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    cached = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="retrievallog_recent"),
            models.Index(fields=["correlation_id"], name="retrievallog_correlation"),
        ]

    def __str__(self) -> str:
        return f"{self.correlation_id} ({self.result_count} results, {self.latency_ms:.0f} ms)"

"""Retrieval's own data: the audit log of every retrieve call and the full-text word statistics."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RetrievalLog(models.Model):
    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="retrieval_logs")
    user_id = models.CharField(max_length=255)
    correlation_id = models.CharField(max_length=64)
    # Only a hash of the query: the log must not become a second copy of conversations.
    query_hash = models.CharField(max_length=64)
    result_count = models.PositiveIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    # The relevance score of each returned memory, in the order of memory_ids.
    scores = models.JSONField(default=list, blank=True)
    latency_ms = models.FloatField()
    degraded = models.JSONField(default=list, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    cached = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="retrievallog_recent"),
            models.Index(fields=["correlation_id"], name="retrievallog_correlation"),
        ]

    def __str__(self) -> str:
        return f"{self.correlation_id} ({self.result_count} results, {self.latency_ms:.0f} ms)"


class KeywordStats(models.Model):
    """How many active memories one owner has, for the full-text stage's common-word check.

    ``owner`` is a user id for ``user``-scope memories and "" for the project's
    ``project``-scope ones: the two groups a search can see. Kept only for groups large
    enough for the check to matter (``MEMORYHUB_KEYWORD_STATS_MIN_ROWS``) and refreshed by
    beat (``retrieval.ranking.keyword_stats``).
    """

    project = models.ForeignKey("memories.Project", on_delete=models.CASCADE, related_name="keyword_stats")
    owner = models.CharField(max_length=255, blank=True)
    rows = models.PositiveIntegerField()
    refreshed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "owner"], name="keywordstats_project_owner")]

    def __str__(self) -> str:
        return f"{self.project_id}/{self.owner or '(project)'}: {self.rows} rows"


class CommonLexeme(models.Model):
    """A word (Postgres lexeme) found in at least ``STORE_SHARE`` of a group's memories."""

    stats = models.ForeignKey(KeywordStats, on_delete=models.CASCADE, related_name="lexemes")
    lexeme = models.TextField()
    docs = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stats", "lexeme"], name="commonlexeme_stats_lexeme")]

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.docs}"

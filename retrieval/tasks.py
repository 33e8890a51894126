"""Retrieval's periodic work (the embedding tasks live with capture's, in capture/tasks.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from retrieval.keyword_stats import refresh_keyword_stats


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330, name="retrieval.tasks.refresh_keyword_stats_task")
def refresh_keyword_stats_task() -> dict[str, Any]:
    """Recount common words for groups that grew or shrank (beat runs this every 10 minutes)."""
    result = refresh_keyword_stats()
    return {"refreshed": result.refreshed, "removed": result.removed, "kept": result.kept}

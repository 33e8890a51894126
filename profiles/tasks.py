"""The profiles' Celery task: thin, idempotent (a rebuild that changes nothing writes nothing)."""

from __future__ import annotations

from celery import shared_task

from profiles.services import profiles_rebuild_queued


@shared_task(name="profiles.tasks.rebuild_profiles_task", acks_late=True, soft_time_limit=120, time_limit=150)
def rebuild_profiles_task(project_id: int, user_id: str) -> list[str]:
    """Rebuild one user's profile, or every profile of the project when ``user_id`` is ""."""
    return profiles_rebuild_queued(project_id=project_id, user_id=user_id)

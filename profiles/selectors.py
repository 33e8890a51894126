"""Reads of profiles, always for one project and one end user. Retrieval reads the profile it
injects through here (this module sits below retrieval in the import layers)."""

from __future__ import annotations

from django.db.models import QuerySet

from common.errors import NotFound
from memories.models import Project
from profiles.models import Profile, ProfileVersion


def profile_find(*, project: Project, user_id: str) -> Profile | None:
    """The profile of ``user_id`` in ``project``, or None when none was built yet."""
    return Profile.objects.filter(project=project, user_id=user_id).first()


def profile_get(*, project: Project, user_id: str) -> Profile:
    """The profile of ``user_id`` in ``project``, or NotFound."""
    profile = profile_find(project=project, user_id=user_id)
    if profile is None:
        raise NotFound(f"no profile for user {user_id!r} yet", code="profile_not_found")
    return profile


def profile_versions(*, profile: Profile, limit: int = 20) -> QuerySet[ProfileVersion]:
    """The profile's latest versions, newest first."""
    return profile.versions.order_by("-version")[:limit]


def profile_user_ids(*, project: Project) -> list[str]:
    """The end users of ``project`` who have a profile."""
    return list(Profile.objects.filter(project=project).order_by("user_id").values_list("user_id", flat=True))

"""The profile endpoints: read an end user's profile, rebuild it now."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from common.auth import ERRORS, actor, api_key
from common.errors import Invalid, NotFound
from profiles import selectors, services
from profiles.schemas import ProfileOut

router = Router(tags=["users"])


def _checked(user_id: str) -> str:
    if not user_id.strip() or len(user_id) > 255:
        raise Invalid("user_id must be 1 to 255 characters", code="invalid_user_id")
    return user_id


@router.get("/users/{user_id}/profile", response={200: ProfileOut, **ERRORS})
def get_profile(request: HttpRequest, user_id: str) -> dict[str, Any]:
    """The user's profile: standing facts from their active memories, each with the memories it
    rests on (404 ``profile_not_found`` before the first is built)."""
    profile = selectors.profile_get(project=api_key(request).project, user_id=_checked(user_id))
    return services.profile_as_dict(profile)


@router.post("/users/{user_id}/profile/rebuild", response={200: ProfileOut, **ERRORS})
def rebuild_profile(request: HttpRequest, user_id: str) -> dict[str, Any]:
    """Rebuild the profile now instead of after the next change (a new version only if it changed)."""
    profile = services.profile_rebuild(
        project=api_key(request).project, user_id=_checked(user_id), actor=actor(request), reason="rebuilt on request"
    )
    if profile is None:
        raise NotFound(f"user {user_id!r} has no memory a profile could rest on", code="profile_not_found")
    return services.profile_as_dict(profile)

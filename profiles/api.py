"""The profile endpoints: read an end user's profile and its versions, edit it, rebuild it now."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from common.auth import ERRORS, actor, api_key
from common.errors import Invalid, NotFound
from profiles import selectors, services
from profiles.schemas import ProfileEditIn, ProfileOut, ProfileVersionsOut

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


@router.patch("/users/{user_id}/profile", response={200: ProfileOut, **ERRORS})
def edit_profile(request: HttpRequest, user_id: str, body: ProfileEditIn) -> dict[str, Any]:
    """Pin facts written by hand (always first) and leave memories out; both survive rebuilds until
    the next edit. A field left out keeps its value; every edit is a new version."""
    profile = services.profile_edit(
        project=api_key(request).project,
        user_id=_checked(user_id),
        pinned=body.pinned,
        hidden=body.hidden_memory_ids,
        actor=actor(request),
        reason=body.reason,
    )
    return services.profile_as_dict(profile)


@router.get("/users/{user_id}/profile/versions", response={200: ProfileVersionsOut, **ERRORS})
def profile_versions(request: HttpRequest, user_id: str, limit: int = 20) -> dict[str, Any]:
    """The profile's versions, newest first: what each held, who made it and why."""
    if not 1 <= limit <= 100:
        raise Invalid("limit must be 1 to 100", code="invalid_limit")
    profile = selectors.profile_get(project=api_key(request).project, user_id=_checked(user_id))
    versions = selectors.profile_versions(profile=profile, limit=limit)
    return {
        "user_id": profile.user_id,
        "versions": [
            {
                "version": v.version,
                "text": v.text,
                "pinned": v.pinned,
                "hidden_memory_ids": v.hidden_memory_ids,
                "actor": v.actor,
                "reason": v.reason,
                "created_at": v.created_at,
            }
            for v in versions
        ],
    }

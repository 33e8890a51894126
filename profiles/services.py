"""Writes of profiles: rebuilt from a user's active memories, edited by a person, versioned.

A rebuild that would change nothing writes nothing (no new version), so rebuilding twice is
harmless and the debounced task may run more often than needed. Facts a person pinned and
memories they left out are kept by every rebuild until they edit the profile again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from common.errors import Invalid
from common.queue import publish
from common.redis import redis_client
from memories.models import Memory, Project, Scope
from memories.selectors import memories_live
from profiles.builder import Built, Candidate, build
from profiles.models import Profile, ProfileVersion

log = logging.getLogger(__name__)

REBUILD_TASK = "profiles.tasks.rebuild_profiles_task"
REBUILDER = "system:profile"
# The newest memories a rebuild reads: a user with more still gets a profile in bounded time.
MAX_CANDIDATES = 5_000
MAX_PINNED = 20
MAX_PINNED_CHARS = 500


def queued_key(project_id: int, user_id: str) -> str:
    """The Redis key that says a rebuild of this user ("" : every profile of the project) is queued."""
    return f"profiles:queued:{project_id}:{user_id}"


def schedule_rebuild(project_id: int, user_id: str, scope: str) -> None:
    """The memory services' hook: queue one rebuild after a change, unless one is already queued.

    The task runs ``MEMORYHUB_PROFILE_DEBOUNCE_S`` later, so a capture that writes ten memories
    rebuilds once. A shared (project-scope) memory changes every profile of the project.
    """
    target = user_id if scope == Scope.USER else ""
    delay = float(settings.MEMORYHUB_PROFILE_DEBOUNCE_S)
    try:
        # Expires well after the task should have run: a lost message does not block rebuilds for good.
        first = bool(redis_client().set(queued_key(project_id, target), "1", nx=True, ex=int(delay * 4) + 60))
    except redis.RedisError:
        first = True
    if first:
        publish(
            REBUILD_TASK, (project_id, target), waiting="the profile is rebuilt on the next change", countdown=delay
        )


def candidates(*, project: Project, user_id: str) -> list[Candidate]:
    """The active memories a profile may rest on: the user's own and the project's shared ones."""
    rows = (
        memories_live(project=project, user_id=user_id)
        .filter(Q(scope=Scope.USER, user_id=user_id) | Q(scope=Scope.PROJECT))
        .order_by("-created_at")
        .values_list("id", "content", "kind", "category", "scope", "importance", "created_at")[:MAX_CANDIDATES]
    )
    return [Candidate(str(row[0]), *row[1:]) for row in rows]


def profile_build(*, project: Project, user_id: str, pinned: Sequence[str] = (), hidden: Sequence[str] = ()) -> Built:
    """What the profile of ``user_id`` would hold now (nothing is written)."""
    budget = int(settings.MEMORYHUB_PROFILE_TOKENS)
    return build(candidates(project=project, user_id=user_id), budget=budget, pinned=pinned, hidden=hidden)


def profile_rebuild(*, project: Project, user_id: str, actor: str = REBUILDER, reason: str = "") -> Profile | None:
    """Rebuild the profile of ``user_id`` from their active memories; a new version only when it
    changed. None when the user has neither a profile nor a memory it could rest on."""
    with transaction.atomic(durable=True):
        profile = Profile.objects.select_for_update().filter(project=project, user_id=user_id).first()
        pinned, hidden = (profile.pinned, profile.hidden_memory_ids) if profile else ([], [])
        built = profile_build(project=project, user_id=user_id, pinned=pinned, hidden=hidden)
        if profile is None and not built.facts:
            return None
        return _save(profile, built, project=project, user_id=user_id, actor=actor, reason=reason or "rebuilt")


def profile_edit(
    *,
    project: Project,
    user_id: str,
    pinned: Sequence[str] | None,
    hidden: Sequence[str] | None,
    actor: str,
    reason: str = "",
) -> Profile:
    """A person's edit: ``pinned`` facts (written by hand, always first) and the memory ids left
    out; None keeps what the profile has. Writes a new version; both survive rebuilds until the
    next edit."""
    if pinned is not None:
        pinned = [" ".join(text.split()) for text in pinned if text.strip()]
        if len(pinned) > MAX_PINNED or any(len(text) > MAX_PINNED_CHARS for text in pinned):
            raise Invalid(
                f"at most {MAX_PINNED} pinned facts of {MAX_PINNED_CHARS} characters each", code="invalid_profile"
            )
    if hidden is not None:
        _check_hidden(project=project, user_id=user_id, hidden=hidden)
    with transaction.atomic(durable=True):
        profile = Profile.objects.select_for_update().filter(project=project, user_id=user_id).first()
        if pinned is None:
            pinned = profile.pinned if profile else []
        if hidden is None:
            hidden = profile.hidden_memory_ids if profile else []
        built = profile_build(project=project, user_id=user_id, pinned=pinned, hidden=hidden)
        if profile is None:
            profile = Profile(project=project, user_id=user_id, version=0)
        profile.pinned, profile.hidden_memory_ids = list(pinned), sorted(set(hidden))
        saved = _save(
            profile, built, project=project, user_id=user_id, actor=actor, reason=reason or "edited", force=True
        )
    return saved


def _check_hidden(*, project: Project, user_id: str, hidden: Sequence[str]) -> None:
    """Every memory left out is one the profile could rest on: the user's own or a shared one of
    the project. Another user's id is refused as an unknown one is: nothing says it exists."""
    ids = set(hidden)
    if not ids:
        return
    valid = set()
    for value in ids:
        try:
            valid.add(uuid.UUID(value))
        except ValueError:
            continue
    found = {
        str(pk)
        for pk in Memory.objects.filter(project=project, pk__in=valid)
        .filter(Q(scope=Scope.USER, user_id=user_id) | Q(scope=Scope.PROJECT))
        .values_list("pk", flat=True)
    }
    unknown = sorted(i for i in ids if i not in found)
    if unknown:
        raise Invalid(
            f"not a memory of user {user_id!r}: {', '.join(unknown[:5])}",
            code="invalid_profile",
            details={"unknown_memory_ids": unknown},
        )


def _save(
    profile: Profile | None,
    built: Built,
    *,
    project: Project,
    user_id: str,
    actor: str,
    reason: str,
    force: bool = False,
) -> Profile:
    facts = [fact.as_json() for fact in built.facts]
    if profile is not None and not force and profile.facts == facts and profile.pk:
        return profile
    if profile is None:
        profile = Profile(project=project, user_id=user_id, version=0)
    profile.version += 1
    profile.text, profile.facts, profile.token_count = built.text, facts, built.token_count
    profile.save()
    ProfileVersion.objects.create(
        profile=profile,
        version=profile.version,
        text=profile.text,
        facts=facts,
        pinned=profile.pinned,
        hidden_memory_ids=profile.hidden_memory_ids,
        actor=actor,
        reason=reason,
    )
    return profile


def profiles_rebuild_queued(*, project_id: int, user_id: str) -> list[str]:
    """What the debounced task does: clear the queued mark, then rebuild that user's profile (or,
    for "", every profile of the project). Returns the user ids whose profile got a new version."""
    try:
        redis_client().delete(queued_key(project_id, user_id))
    except redis.RedisError:
        log.warning("profiles: Redis unavailable; the queued mark expires on its own")
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return []
    users = [user_id] if user_id else list(Profile.objects.filter(project=project).values_list("user_id", flat=True))
    changed = []
    for user in users:
        before = Profile.objects.filter(project=project, user_id=user).values_list("version", flat=True).first()
        profile = profile_rebuild(project=project, user_id=user)
        if profile is not None and profile.version != before:
            changed.append(user)
    return changed


def profile_as_dict(profile: Profile) -> dict[str, Any]:
    """The API's profile object (``ProfileOut``)."""
    return {
        "user_id": profile.user_id,
        "text": profile.text,
        "facts": [
            {"text": f["text"], "memory_ids": f["memory_ids"], "pinned": f.get("pinned", False)} for f in profile.facts
        ],
        "version": profile.version,
        "token_count": profile.token_count,
        "updated_at": profile.updated_at,
        "pinned": list(profile.pinned),
        "hidden_memory_ids": list(profile.hidden_memory_ids),
    }

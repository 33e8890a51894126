"""Writes to tenancy: teams, projects and their settings, API keys, memberships.

The API's authentication, the curation UI's settings and admin pages, and the management commands
call these; like ``memories.services`` each change is validated here, not only in forms.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from common import row_security
from common.errors import Conflict, Invalid, NotFound
from memories.models import ApiKey, Membership, Project, Role, Team
from memories.selectors import api_key_active

# --- Teams, projects and keys -----------------------------------------------------


def project_get_or_create(*, slug: str, team_slug: str | None = None) -> Project:
    """The project with ``slug``, created (with a team of the same name) if missing."""
    with transaction.atomic():
        team, _ = Team.objects.get_or_create(slug=team_slug or slug, defaults={"name": team_slug or slug})
        project, _ = Project.objects.get_or_create(slug=slug, defaults={"team": team, "name": slug})
    return project


def hash_api_key(plain: str) -> str:
    # Keys are 256-bit random strings, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(plain.encode()).hexdigest()


def api_key_create(*, project: Project, name: str = "", created_by: Any = None) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the plain key, which is never stored."""
    prefix = secrets.token_hex(4)
    plain = f"mh_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        project=project, name=name, prefix=prefix, key_hash=hash_api_key(plain), created_by=created_by
    )
    return key, plain


def api_key_authenticate(*, token: str) -> ApiKey | None:
    """The live key ``token`` names (with its project), or None; marks it used.

    On success this connection sees only the key's project rows from here on
    (``row_security.enter``): every transport that takes a key (the HTTP API, the MCP
    server) authenticates through here, so each enters the tenant wall the same way.
    """
    # The lookup enters the tenant wall in its own statement when the key matches.
    key = api_key_active(key_hash=hash_api_key(token), enter_tenant=row_security.available())
    if key is None:
        return None
    # One write a minute per key is plenty for "last used", and keeps reads read-only (the key's
    # own row: the tenant role may write it).
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key: requests with it answer 401 from now on."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


# --- Curation UI: project settings, memberships --------------------

PROJECT_SETTINGS_FIELDS = frozenset(
    {
        "capture_policy",
        "auto_approve_confidence",
        "taxonomy",
        "hyde_enabled",
        "token_budget",
        "retrieval_rate_limit",
        "min_score",
    }
)


def project_settings_update(*, project: Project, changes: dict[str, Any]) -> Project:
    """Change a project's capture and retrieval settings (validated here, not only in forms)."""
    unknown = set(changes) - PROJECT_SETTINGS_FIELDS
    if unknown:
        raise Invalid(f"cannot change {', '.join(sorted(unknown))}", code="not_editable")
    taxonomy = changes.get("taxonomy", project.taxonomy)
    if not taxonomy or len(set(taxonomy)) != len(taxonomy) or not all(isinstance(c, str) and c for c in taxonomy):
        raise Invalid("the taxonomy needs at least one category and no duplicates", code="invalid_taxonomy")
    if not 0 <= float(changes.get("auto_approve_confidence", project.auto_approve_confidence)) <= 1:
        raise Invalid("auto-approve confidence must be between 0 and 1", code="invalid_confidence")
    if int(changes.get("token_budget", project.token_budget)) < 1:
        raise Invalid("the token budget must be at least 1", code="invalid_token_budget")
    if int(changes.get("retrieval_rate_limit", project.retrieval_rate_limit)) < 0:
        raise Invalid("the rate limit cannot be negative (0: no limit)", code="invalid_rate_limit")
    min_score = changes.get("min_score", project.min_score)
    if min_score is not None and not 0 <= float(min_score) <= 1:
        raise Invalid("min_score must be between 0 and 1, or empty for the default", code="invalid_min_score")
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update().get(pk=project.pk)
        for name, value in changes.items():
            setattr(project, name, value)
        project.save(update_fields=sorted(changes))
    return project


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise Invalid(f"unknown role {role!r}", code="unknown_role")


def _keep_an_admin(membership: Membership) -> None:
    # A team without an admin could never manage its keys or members again.
    others = Membership.objects.filter(team_id=membership.team_id, role=Role.ADMIN).exclude(pk=membership.pk)
    if membership.role == Role.ADMIN and not others.exists():
        raise Conflict("a team needs at least one admin", code="last_admin")


def membership_add(*, team: Team, username: str, role: str) -> Membership:
    """Make an existing Django user a member of ``team`` with ``role``."""
    _check_role(role)
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise NotFound(f"no user named {username.strip()!r}", code="unknown_user")
    with transaction.atomic(durable=True):
        membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
    if not created:
        raise Conflict(f"{user.get_username()} is already a member", code="already_member")
    return membership


def person_create(*, team: Team, username: str, role: str) -> Membership:
    """Create a person (a Django user with no usable password yet) as a member of ``team``.

    They choose their password through a one-time link the admin hands them (the UI makes
    it with Django's password-reset token, which stops working once a password is set).
    """
    _check_role(role)
    username = username.strip()
    model = get_user_model()
    with transaction.atomic(durable=True):
        if model.objects.filter(username=username).exists():
            raise Conflict(f"{username!r} exists already: add them as a member instead", code="user_exists")
        user = model(username=username)
        user.set_unusable_password()
        user.save()
        return Membership.objects.create(team=team, user=user, role=role)


def membership_set_role(*, membership: Membership, role: str) -> Membership:
    """Change a member's role; the last admin cannot step down."""
    _check_role(role)
    with transaction.atomic(durable=True):
        membership = Membership.objects.select_for_update().get(pk=membership.pk)
        if role != Role.ADMIN:
            _keep_an_admin(membership)
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(*, membership: Membership) -> None:
    """Remove a member from the team; the last admin cannot be removed."""
    with transaction.atomic(durable=True):
        membership = Membership.objects.select_for_update().get(pk=membership.pk)
        _keep_an_admin(membership)
        membership.delete()

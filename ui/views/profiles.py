"""The profile of one end user: its facts with the memories they rest on, its versions, and the
edit form (pinned facts, memories left out) and a rebuild on request."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from common.errors import DomainError
from memories.models import Role
from memories.selectors import memories_visible
from profiles import selectors, services
from profiles.models import Profile
from ui.views.access import Access, done, page_context, project_view, refuse


def profile_url(access: Access, user_id: str) -> str:
    return reverse("ui:profile", args=[access.project.slug, user_id])


def _facts(access: Access, profile: Profile | None, user_id: str) -> list[dict[str, Any]]:
    """Each fact with the memories it rests on, read for this project and user only."""
    if profile is None:
        return []
    ids = {i for fact in profile.facts for i in fact.get("memory_ids", [])}
    found = {str(m.pk): m for m in memories_visible(project=access.project, user_id=user_id).filter(pk__in=ids)}
    return [
        {**fact, "memories": [found[i] for i in fact.get("memory_ids", []) if i in found]} for fact in profile.facts
    ]


@project_view(Role.VIEWER, write=Role.REVIEWER)
def profile_page(request: HttpRequest, access: Access, user_id: str) -> HttpResponse:
    """GET: the profile. POST: ``action=rebuild`` rebuilds it; otherwise saves the edit form."""
    back = profile_url(access, user_id)
    if request.method == "POST":
        try:
            if request.POST.get("action") == "rebuild":
                services.profile_rebuild(project=access.project, user_id=user_id, actor=access.actor, reason="rebuilt")
                return done(request, "Rebuilt.", back=back)
            pinned = request.POST.get("pinned", "").splitlines()
            hidden = request.POST.getlist("hide")
            reason = request.POST.get("reason", "").strip()
            services.profile_edit(
                project=access.project, user_id=user_id, pinned=pinned, hidden=hidden, actor=access.actor, reason=reason
            )
        except DomainError as error:
            return refuse(request, error, back=back)
        return done(request, "Saved as a new version.", back=back)
    profile = selectors.profile_find(project=access.project, user_id=user_id)
    versions = list(selectors.profile_versions(profile=profile, limit=10)) if profile else []
    context = page_context(
        access,
        user_id=user_id,
        profile=profile,
        facts=_facts(access, profile, user_id),
        versions=versions,
        pinned_text="\n".join(profile.pinned) if profile else "",
        nav="memories",
    )
    return render(request, "ui/profile.html", context)

"""The signed-in person's start page: their teams' projects with counts and the review backlog."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ui import page_selectors
from ui.views.access import signed_in


@signed_in
def home(request: HttpRequest) -> HttpResponse:
    """Teams the person sees, each project with its active and pending-review memories."""
    teams = page_selectors.home_teams(user=request.user)  # type: ignore[arg-type]
    backlog = [row for team in teams for row in team.projects if row.pending]
    context = {"teams": teams, "backlog": backlog, "backlog_total": sum(row.pending for row in backlog)}
    return render(request, "ui/home.html", context)

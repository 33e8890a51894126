"""The signed-in person's start page: their teams and those teams' projects."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ui import selectors as ui_selectors
from ui.views.access import signed_in


@signed_in
def home(request: HttpRequest) -> HttpResponse:
    """Teams the person belongs to, each with its projects and the person's role."""
    memberships = ui_selectors.memberships_for(user=request.user)  # type: ignore[arg-type]
    return render(request, "ui/home.html", {"memberships": memberships})

"""The memory graph of one end user: a page that draws it (static/memories/graph.js)
and the JSON it is drawn from."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from ui import selectors as ui_selectors
from ui.views.access import Access, page_context, project_view


def _end_user(request: HttpRequest, access: Access, users: list[str]) -> str:
    """The end user asked for, else the one last viewed in this project, else the one with the
    most memories: the alphabetically first may have a single memory and show no graph at all."""
    remembered = f"graph_user:{access.project.pk}"
    chosen = request.GET.get("user", "").strip()
    if chosen:
        request.session[remembered] = chosen
        return chosen
    last = request.session.get(remembered)
    if isinstance(last, str) and last in users:
        return last
    return ui_selectors.busiest_end_user(project=access.project)


@project_view()
def graph_page(request: HttpRequest, access: Access) -> HttpResponse:
    """Choose an end user; the script fetches their graph and lays it out."""
    users = ui_selectors.end_users(project=access.project)
    user_id = _end_user(request, access, users)
    data_url = reverse("ui:graph_data", args=[access.project.slug])
    context = page_context(access, users=users, user_id=user_id, data_url=data_url, nav="graph")
    return render(request, "ui/graph.html", context)


@project_view()
def graph_data(request: HttpRequest, access: Access) -> JsonResponse:
    """Nodes and edges of the end user's visible memories (project-scope ones included)."""
    user_id = request.GET.get("user", "").strip()
    data = ui_selectors.graph_data(project=access.project, user_id=user_id) if user_id else {"nodes": [], "edges": []}
    base = reverse("ui:memory", args=[access.project.slug, "00000000-0000-0000-0000-000000000000"])
    for node in data["nodes"]:
        node["url"] = base.replace("00000000-0000-0000-0000-000000000000", node["id"])
        node["label"] = node.pop("content")[:140]
    return JsonResponse(data)

"""URL map: the JSON API under /api/v1/, the curation UI everywhere else."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.urls import include, path, re_path

from integrations.mcp.http import mcp_endpoint
from memoryhub.api import api


def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """An unknown path under /api/v1/ answers in the error envelope, not an HTML page."""
    body = {"error": {"code": "not_found", "message": f"no API endpoint at /api/v1/{rest}", "details": None}}
    return JsonResponse(body, status=404)


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico whatever the page names (the API docs, the admin): the UI's icon."""
    return HttpResponsePermanentRedirect(static("ui/favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("api/v1/", api.urls),
    re_path(r"^api/v1/(?P<rest>.*)$", api_not_found),
    re_path(r"^mcp/?$", mcp_endpoint, name="mcp"),
    path("admin/", admin.site.urls),
    path("", include("ui.urls")),
]

"""URL map: the JSON API under /api/v1/, the curation UI everywhere else."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from memoryhub.api import api

urlpatterns = [
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    path("", include("memories.urls")),
]

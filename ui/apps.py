from __future__ import annotations

from django.apps import AppConfig


class UiConfig(AppConfig):
    """The htmx curation UI: views, forms, selectors shaped for pages, template tags."""

    name = "ui"
    default_auto_field = "django.db.models.BigAutoField"

from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    """Measuring the service, never part of it: datasets, metrics, reports and the ``eval_*``,
    ``fit_*`` and ``bench_*`` commands. No runtime module imports this app."""

    name = "evaluation"
    default_auto_field = "django.db.models.BigAutoField"

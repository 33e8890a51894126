"""gunicorn settings shared by `make run`, bench_retrieve and the Docker image.

Callers add only where to listen and how much to log.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
from django.conf import settings  # noqa: E402 - after the settings module is named

from memoryhub.config import load_settings  # noqa: E402

load_settings()
workers = settings.WEB_CONCURRENCY
worker_class = "gthread"
threads = 4
timeout = 60
graceful_timeout = 10


def on_starting(server: Any) -> None:
    """gunicorn started by hand gets the embedded servers the configuration uses (once, in the master)."""
    from memoryhub import embedded

    embedded.start_servers()


def post_worker_init(worker: Any) -> None:
    """Load the embedding model, the token encoding and the relevance background first.

    Both take about a second to load; without this the first retrieve a worker
    serves pays for it.
    """
    from retrieval.embedders import embedder_health
    from retrieval.relevance import warm_up
    from retrieval.tokens import count_tokens

    count_tokens("warm up")
    embedder_health()
    warm_up()

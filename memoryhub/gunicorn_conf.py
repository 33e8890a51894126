"""gunicorn settings shared by `make run`, bench_retrieve and the Docker image.

Callers add only where to listen and how much to log.
"""

from __future__ import annotations

import os
from typing import Any

workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "gthread"
threads = 4
timeout = 60
graceful_timeout = 10


def post_worker_init(worker: Any) -> None:
    """Load the embedding model, the token encoding and the relevance background first.

    Both take about a second to load; without this the first retrieve a worker
    serves pays for it.
    """
    from retrieval.embedding import embedder_health
    from retrieval.relevance import warm_up
    from retrieval.tokens import count_tokens

    count_tokens("warm up")
    embedder_health()
    warm_up()

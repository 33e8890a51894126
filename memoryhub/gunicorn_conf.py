"""gunicorn settings shared by `make run`, bench_retrieve and the Docker image."""

from __future__ import annotations

from typing import Any


def post_worker_init(worker: Any) -> None:
    """Load the embedding model and the token encoding before the first request.

    Both take about a second to load; without this the first retrieve a worker
    serves pays for it.
    """
    from retrieval.embedding import embedder_health
    from retrieval.tokens import count_tokens

    count_tokens("warm up")
    embedder_health()

"""The query side of a retrieve: what is asked (the query, the recent context, the window for
HyDE), HyDE's hypotheses, and the query vectors (one batch, cached per project)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from conversations.window import clean_window, render_window
from memories.models import Project
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.protocol import Embedder, EmbedderError
from retrieval.embedding.vector_cache import cache_name, embed_texts, project_cache_name
from retrieval.hyde import build_hyde_messages, parse_hypotheses
from retrieval.llm import LLMError, complete, llm_configured

if TYPE_CHECKING:
    from retrieval.shapes import RetrieveRequest, Trace

log = logging.getLogger(__name__)

CONTEXT_MESSAGES = 3


def conversation_text(request: RetrieveRequest) -> tuple[str, str, str]:
    """(search query, recent context, HyDE window) from ``query`` or the message window.

    The last user message is the query; the last few messages are a second query vector,
    because in conversation the need is often in an earlier turn ("wrap it the way I
    usually do").
    """
    if request.messages:
        window = clean_window(request.messages)
        users = [m["content"] for m in window if m["role"] == "user"]
        context = " ".join(m["content"] for m in window[-CONTEXT_MESSAGES:])
        return (users[-1] if users else ""), context, render_window(window)
    return (request.query or ""), "", (request.query or "")


def query_texts(query: str, context: str) -> list[str]:
    """The texts embedded as query vectors: the query, and the recent context when it says more."""
    return [query, context] if context and context != query else [query]


def wants_hyde(project: Project, request: RetrieveRequest) -> bool:
    wanted = project.hyde_enabled if request.hyde is None else request.hyde
    return bool(wanted) and llm_configured()


def run_hyde(window: str, *, trace: Trace, deadline: float) -> list[str]:
    """Hypothetical memory sentences from the LLM, within the HyDE sub-budget."""
    started = time.perf_counter()
    timeout = min(float(getattr(settings, "MEMORYHUB_HYDE_TIMEOUT_S", 1.2)), deadline - started)
    try:
        if timeout <= 0.05:
            raise LLMError("no time left for HyDE")
        reply = complete(
            build_hyde_messages(window, n=int(getattr(settings, "MEMORYHUB_HYDE_N", 3))),
            model=settings.MEMORYHUB_HYDE_MODEL,
            timeout=timeout,
            max_tokens=200,
        )
        hypotheses = parse_hypotheses(reply, n=int(getattr(settings, "MEMORYHUB_HYDE_N", 3)))
        if not hypotheses:
            trace.degraded.append("hyde_empty")
    except (LLMError, ValueError) as error:
        log.info("HyDE skipped: %s", error)
        trace.degraded.append("hyde_unavailable")
        hypotheses = []
    trace.timed("hyde", started)
    return hypotheses


def embed_queries(
    texts: Sequence[str], *, model: str, project_id: int, trace: Trace, looked_up: Sequence[bytes | None] = ()
) -> np.ndarray | None:
    """Query and hypotheses in one batch; None (full text only) when the embedder fails.

    Query vectors are cached per project: with one cache for everybody, the embed time in
    ``timings_ms`` told a tenant whether another tenant had stored or asked the same text.
    ``looked_up``: the first texts' cached vectors as :func:`retrieve` read them with the turn's
    entry (``embed_texts``).
    """
    started = time.perf_counter()
    try:
        vectors = embed_texts(list(texts), embedder=query_embedder(model, project_id), looked_up=looked_up)
    except EmbedderError as error:
        log.warning("query embedding failed: %s", error)
        trace.degraded.append("embedder_unavailable")
        vectors = None
    trace.timed("embed", started)
    return vectors


def query_embedder(model: str, project_id: int) -> ProjectCache:
    """The embedder of a project's query vectors (cached under the project's name)."""
    return ProjectCache(embedder_for_model(model), project_id)


@dataclass(frozen=True)
class ProjectCache:
    """An embedder whose query vectors are cached under the project's own name (see embed_queries)."""

    embedder: Embedder
    project_id: int

    @property
    def name(self) -> str:
        return project_cache_name(cache_name(self.embedder), self.project_id)

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(texts)

"""The one seam between MemoryHub and an embedding model: which embedder makes which vectors.

``get_embedder()`` returns the configured implementation: the bundled all-MiniLM-L6-v2 int8
ONNX model (``LocalEmbedder``, offline, the default), the optional all-mpnet-base-v2 int8 ONNX
model that ``make mpnet`` builds (``MpnetEmbedder``, offline) or any OpenAI-compatible
``/v1/embeddings`` endpoint (``OpenAIEmbedder``); ``embedder_for_model()`` the one that makes a
given model's vectors. Instances are kept per process. All return float32 rows of unit length,
so cosine similarity is a dot product (``protocol``). Also here: the warm start and the health
check of the configured embedder.
"""

from __future__ import annotations

import contextlib
import threading
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME, LocalEmbedder
from retrieval.embedding.mpnet_embedder import MPNET_MODEL_NAME, MpnetEmbedder
from retrieval.embedding.openai_embedder import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from retrieval.embedding.protocol import Embedder

_embedders: dict[str, Embedder] = {}
# The local models by the name stored next to their vectors.
LOCAL_MODELS: dict[str, type[LocalEmbedder]] = {LOCAL_MODEL_NAME: LocalEmbedder, MPNET_MODEL_NAME: MpnetEmbedder}
_local_embedders: dict[str, LocalEmbedder] = {}
_embedders_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process's embedder, as chosen by ``MEMORYHUB_EMBEDDER`` ("local", "local-mpnet" or "openai")."""
    kind = settings.MEMORYHUB_EMBEDDER
    if kind == "local":
        return embedder_for_model(LOCAL_MODEL_NAME)
    if kind == "local-mpnet":
        return embedder_for_model(MPNET_MODEL_NAME)
    if kind == "openai":
        return embedder_for_model(settings.MEMORYHUB_EMBEDDING_MODEL or DEFAULT_OPENAI_MODEL)
    raise ImproperlyConfigured(f"MEMORYHUB_EMBEDDER must be 'local', 'local-mpnet' or 'openai', not {kind!r}")


def embedder_for_model(name: str) -> Embedder:
    """The embedder that makes vectors named ``name`` (e.g. to embed queries for an older model).

    A local model's name (``LOCAL_MODELS``) gives its local embedder; any other name is served
    by the configured OpenAI-compatible endpoint. Instances are cached per name for the process.
    """
    with _embedders_lock:
        if name in LOCAL_MODELS:
            local = _local_embedders.get(name)
            if local is None:
                local = _local_embedders[name] = LOCAL_MODELS[name]()
            return local
        embedder = _embedders.get(name)
        if embedder is None:
            embedder = _embedders[name] = _openai_embedder_from_settings(name)
        return embedder


def reset_embedder_cache(*, include_local: bool = False) -> None:
    """Forget cached remote embedders so the next call re-reads settings (for tests).

    The local models depend on no endpoint setting and take a while to load, so they are kept
    unless ``include_local`` is set.
    """
    with _embedders_lock:
        _embedders.clear()
        if include_local:
            _local_embedders.clear()


def _openai_embedder_from_settings(model: str) -> OpenAIEmbedder:
    # The configured dimension describes the configured model only, not older models.
    configured = model == (settings.MEMORYHUB_EMBEDDING_MODEL or DEFAULT_OPENAI_MODEL)
    dimension = settings.MEMORYHUB_EMBEDDING_DIMENSION if configured else None
    # Embeddings may come from another server than chat; by default they share one.
    return OpenAIEmbedder(
        model=model,
        base_url=settings.MEMORYHUB_EMBEDDING_BASE_URL or settings.MEMORYHUB_LLM_BASE_URL,
        api_key=settings.MEMORYHUB_EMBEDDING_API_KEY or settings.OPENAI_API_KEY,
        timeout=float(settings.MEMORYHUB_EMBED_TIMEOUT),
        dimension=int(dimension) if dimension else None,
    )


_health: tuple[float, str] = (0.0, "")


def warm_queries() -> None:
    """Build the sessions a query runs on (the local model's int8 sessions, on one thread and on
    ``query_threads()``: ~0.4 s each to rewrite and load) and embed one short query; a failure is
    left for the first request to meet."""
    with contextlib.suppress(Exception):
        embedder = get_embedder()
        if isinstance(embedder, LocalEmbedder):
            embedder.load()
        embedder.embed(["warm up"])


def embedder_health() -> str:
    """``ok`` when the configured embedder answers; otherwise what is wrong (cached 30 s)."""
    global _health
    checked_at, status = _health
    if time.monotonic() - checked_at < 30 and status:
        return status
    try:
        get_embedder().embed(["health check"])
        status = "ok"
    except Exception as error:  # any failure is a status to show, not to raise
        status = f"error: {error}"[:200]
    _health = (time.monotonic(), status)
    return status

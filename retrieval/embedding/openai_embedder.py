"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, through the one openai
client of ``retrieval.llm``; every reply is checked (count, order, size, finite, non-zero) before
its rows are normalised. The openai SDK is imported on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retrieval.embedding.protocol import EmbedderError, Vectors, l2_normalise
from retrieval.llm import describe_openai_error, openai_client

if TYPE_CHECKING:
    from openai import OpenAI

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
OPENAI_BATCH_SIZE = 128
DEFAULT_TIMEOUT = 10.0
# Native sizes of well-known models, so `dimension` is known before the first request.
KNOWN_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


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

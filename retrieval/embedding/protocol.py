"""What every embedder is: the ``Embedder`` protocol, the vectors it returns (``Vectors``, unit
length by ``l2_normalise``) and the error it raises when it cannot make them now (``EmbedderError``),
which callers catch to degrade (a memory saved ``pending``, a search by full text only) instead of
failing. The implementations are ``local_embedder``, ``mpnet_embedder`` and ``openai_embedder``;
``embedders`` chooses one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class EmbedderError(Exception):
    """The embedder could not produce vectors now (timeout, HTTP or connection error, bad reply)."""


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

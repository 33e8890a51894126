"""Relevance: does a candidate bear on what the turn asks? A score in [0, 1] and the cut.

A cosine alone does not mean the same from one query to the next: a short, generic query
("hobbies") sits closer to everything than a specific one, so the same 0.35 is a match for
one query and noise for another. The model therefore reads evidence that does mean the same
for every user and query:

- ``cosine``: the best cosine between the memory and the query (or its conversation
  context, or a HyDE hypothesis, discounted);
- ``standout``: how far that cosine stands above what an *unrelated* memory scores for the
  same query: ``(cosine - mean) / std`` of the query's cosines over a fixed set of everyday
  memories shipped with the project (``data/background_memories.txt``). It needs nothing
  from the user, so a user with a single memory is judged like one with ten thousand;
- ``keyword``: the share of the query's words the memory contains, each word weighted by
  its rarity among the memories the caller can see (``search.py``'s IDF-weighted coverage).

``score = sigmoid(w · features + bias)``, the chance the memory bears on the query. The
default cut keeps a candidate when its score is at least ``min_score`` and at least
``margin`` times the best candidate's score (a memory far weaker than the best answer is
noise next to it). Weights, cut and margin are fitted by ``manage.py fit_relevance`` on
labelled sets and reported on sets held out of the fit (docs/adr/0035-fitted-relevance-cut.md has the table).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.protocol import EmbedderError
from retrieval.embedding.vector_cache import embed_texts
from retrieval.ranking.search import Candidate
from retrieval.vectors.memory_vectors import default_model_name

BACKGROUND_PATH = Path(__file__).parent.parent / "data" / "background_memories.txt"
FEATURE_NAMES = ("cosine", "standout", "keyword")

#: A HyDE hypothesis is the model's guess, so its cosine counts a little less than the query's.
HYDE_COSINE_DISCOUNT = 0.08
_STD_FLOOR = 0.02  # a degenerate background (all cosines equal) must not divide by ~0
# A memory whose vector is not there yet (embedding pending) is judged as a loosely related
# one: it can still pass on a solid keyword match.
MISSING_COSINE, MISSING_STANDOUT = 0.25, 1.5

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RelevanceModel:
    """A fitted logistic model over ``FEATURE_NAMES`` and the default cut that goes with it."""

    weights: tuple[float, ...]
    bias: float
    min_score: float
    margin: float
    fitted_on: str = ""

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURE_NAMES):
            raise ValueError(f"expected {len(FEATURE_NAMES)} weights, got {len(self.weights)}")
        if not all(math.isfinite(x) for x in (*self.weights, self.bias, self.min_score, self.margin)):
            raise ValueError("relevance parameters must be finite")
        if any(w < 0 for w in self.weights):
            raise ValueError("weights must be non-negative: more evidence never lowers relevance")
        if not (0 <= self.min_score <= 1 and 0 <= self.margin <= 1):
            raise ValueError("min_score and margin must lie in [0, 1]")

    def score(self, features: Sequence[float]) -> float:
        return _logistic(self.bias + sum(w * x for w, x in zip(self.weights, features, strict=True)))


#: What the engine uses: ``manage.py fit_relevance --fit golden,everyday`` (weights on both
#: labelled sets, each weighing the same; the cut chosen on them under the product's examples;
#: LoCoMo never used). docs/adr/0035-fitted-relevance-cut.md has the held-out figures.
FITTED = RelevanceModel(
    weights=(0.8602, 0.802, 1.1401),
    bias=-5.2405,
    min_score=0.1,
    margin=0.5,
    fitted_on="golden+everyday",
)

#: What the engine uses when there is no query vector (the embedder is down): the same model with
#: the vector evidence absent. ``FITTED``'s bias and keyword weight assume a cosine and a standout
#: beside them, so the model is fitted again on the same sets' full-text hits with those two at
#: zero (``manage.py fit_relevance --keyword-only``): the score is again the chance that a hit
#: bears on the query, and the cut is chosen the same way.
KEYWORD_ONLY = RelevanceModel(
    weights=(0.0, 0.0, 5.6637),
    bias=-3.9181,
    min_score=0.17,
    margin=0.0,
    fitted_on="golden+everyday, full-text hits",
)


@dataclass(frozen=True)
class Evidence:
    """Why a candidate scored what it did (the playground shows it)."""

    cosine: float
    standout: float
    keyword: float
    score: float

    @property
    def features(self) -> tuple[float, float, float]:
        return (self.cosine, self.standout, self.keyword)


@dataclass(frozen=True)
class Background:
    """Per query vector: mean and spread of its cosines with the background memories."""

    mean: _Array
    std: _Array


_background_lock = threading.Lock()


@cache
def _background_vectors(model: str) -> _Array:
    """The background memories' vectors, in float64 once (converted on every request, they were
    most of ``background``'s time)."""
    sentences = [line.strip() for line in BACKGROUND_PATH.read_text().splitlines() if line.strip()]
    with _background_lock:
        return np.asarray(embed_texts(sentences, embedder=embedder_for_model(model)), dtype=np.float64)


def warm_up() -> None:
    """Embed the background memories for the default model now, not in the first request."""
    with contextlib.suppress(EmbedderError):  # the first request tries again (and degrades if it must)
        _background_vectors(default_model_name())


#: What MiniLM queries score against the background on average (golden and everyday
#: queries: mean 0.061, spread 0.081), used when the background cannot be embedded.
TYPICAL_MEAN, TYPICAL_STD = 0.06, 0.08


def typical_background(query_vectors: int) -> Background:
    """A stand-in when the background memories cannot be embedded (the embedder failed)."""
    return Background(mean=np.full(query_vectors, TYPICAL_MEAN), std=np.full(query_vectors, TYPICAL_STD))


def background(vectors: npt.NDArray[np.float32], *, model: str) -> Background:
    """Background statistics for each query vector (one matrix product, well under 1 ms).

    Raises ``EmbedderError`` when the background memories are not embedded yet and the
    embedder fails now.
    """
    sims = np.asarray(vectors, dtype=np.float64) @ _background_vectors(model).T
    return Background(mean=sims.mean(axis=1), std=np.maximum(sims.std(axis=1), _STD_FLOOR))


def evidences(
    candidates: Sequence[Candidate], *, stats: Background, query_vectors: int, model: RelevanceModel = FITTED
) -> list[Evidence]:
    """The features of each candidate and its score, computed for all of them at once: one at a
    time in Python, ~90 candidates cost ~0.8 ms on a 2-core Xeon.
    The same arithmetic in the same order as the per-candidate formula it replaced, float for float;
    the logistic stays ``math.exp``."""
    if not candidates:
        return []
    cosine = _floats([c.cosine for c in candidates])
    hyde = _floats([c.hyde_cosine for c in candidates]) - HYDE_COSINE_DISCOUNT
    has_cosine, has_hyde = np.isfinite(cosine), np.isfinite(hyde)
    standout = np.where(has_cosine, _standout(cosine, stats, slice(0, query_vectors)), MISSING_STANDOUT)
    cosine = np.where(has_cosine, cosine, MISSING_COSINE)
    standout = np.where(has_hyde, np.maximum(standout, _standout(hyde, stats, slice(query_vectors, None))), standout)
    cosine = np.where(has_hyde, np.maximum(cosine, hyde), cosine)
    keyword = _floats([c.keyword_coverage for c in candidates])
    keyword = np.where(np.isfinite(keyword), np.minimum(np.maximum(keyword, 0.0), 1.0), 0.0)
    cosine = np.minimum(np.maximum(cosine, -1.0), 1.0)
    standout = np.minimum(np.maximum(standout, -10.0), 20.0)
    (w_cosine, w_standout, w_keyword), bias = model.weights, model.bias
    z = bias + ((w_cosine * cosine + w_standout * standout) + w_keyword * keyword)
    return [
        Evidence(c, s, k, score=_logistic(value))
        for c, s, k, value in zip(cosine.tolist(), standout.tolist(), keyword.tolist(), z.tolist(), strict=True)
    ]


def keyword_scores(candidates: Sequence[Candidate], *, model: RelevanceModel = KEYWORD_ONLY) -> list[float]:
    """Each full-text hit's score when there is no query vector: ``model`` over its keyword
    coverage, the vector features absent (zero, as ``model`` was fitted)."""
    keyword = _floats([c.keyword_coverage for c in candidates])
    keyword = np.where(np.isfinite(keyword), np.minimum(np.maximum(keyword, 0.0), 1.0), 0.0)
    return [model.score((0.0, 0.0, value)) for value in keyword.tolist()]


def _floats(values: list[float | None]) -> _Array:
    """float64, NaN for None."""
    return np.array([math.nan if value is None else value for value in values], dtype=np.float64)


def _standout(cosines: _Array, stats: Background, rows: slice) -> _Array:
    """Per cosine, the largest ``(cosine - mean) / std`` over the query vectors in ``rows`` (0 without any)."""
    mean, std = stats.mean[rows], stats.std[rows]
    if not len(mean):
        return np.zeros_like(cosines)
    with np.errstate(invalid="ignore"):  # NaN cosines (none found) are replaced by the caller
        best: _Array = np.max((cosines[:, np.newaxis] - mean) / std, axis=1)
    return best


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(max(z, -500.0), 500.0)))


def select(scored: Sequence[tuple[str, float]], *, min_score: float, margin: float) -> list[tuple[str, float]]:
    """Candidates at or above ``min_score`` and ``margin`` × the best score, best first."""
    ranked = sorted(scored, key=lambda pair: (-pair[1], pair[0]))
    if not ranked:
        return []
    floor = max(min_score, margin * ranked[0][1])
    return [pair for pair in ranked if pair[1] >= floor]

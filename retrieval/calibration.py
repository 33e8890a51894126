"""The keyword-only relevance model and the logistic fitting both relevance models use.

The engine scores candidates with ``retrieval.relevance`` whenever it has query vectors. This
hand-set model scores full-text hits when it has none (the embedder is down), and
:func:`fit_logistic` fits the weights of both. What follows is its original description.

Turn raw retrieval signals into a relevance in [0, 1] that means the same across queries.

Reciprocal rank fusion orders candidates but its score is rank-only: the best candidate of a
query about nothing the user ever said gets the same RRF score as a perfect match. A threshold
(``min_score``) needs an absolute signal, so relevance is a logistic model over evidence that
does carry absolute meaning::

    z = slope * (cosine - midpoint)                      # semantic closeness
        + keyword_bonus * [matched by full-text search]
        + keyword_rank_weight * rank / (rank + rank_half)   # keyword coverage, saturating
        + agreement_bonus * [matched by both keyword and vector search]
        + vector_bonus * [matched by vector search] + fused_weight * fused * fused_scale
    relevance = 1 / (1 + exp(-z))

Every weight is non-negative, so relevance never decreases when any signal grows. The defaults
are set by hand for all-MiniLM-L6-v2 (an unrelated memory sits near cosine 0.1, a loosely
related one near 0.3, a matching one at 0.5 and above) and are meant to be replaced by a fit on
labelled (query, memory, relevant?) pairs: build rows with :func:`features` and fit them with
:func:`fit_params` (which uses :func:`fit_logistic` and :func:`params_from_fit`).
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from retrieval.search import Candidate

#: The cut-off for the hand-set model, which scores only full-text hits when the embedder is
#: down: with no vector evidence a memory needs a solid keyword match (about half the query's
#: words) to pass. Set by hand with the defaults below; the engine's normal cut-off is
#: ``FITTED_MIN_SCORE``.
DEFAULT_MIN_SCORE = 0.5

#: Column order of :func:`features` and of the weights :func:`fit_logistic` returns for them.
FEATURE_NAMES = ("cosine", "in_keyword", "keyword_rank", "agreement", "in_vector", "fused")

_Z_LIMIT = 500.0  # exp(500) is still a finite float
_FUSED_CAP = 1e6

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CalibrationParams:
    """Parameters of :func:`relevance`; weights are non-negative so relevance stays monotone."""

    cosine_midpoint: float = 0.38
    cosine_slope: float = 15.0
    # A candidate without a cosine (embedder down, embedding pending) is scored as if it had
    # this one: weak on its own, enough with a solid keyword match.
    missing_cosine: float = 0.25
    keyword_bonus: float = 1.0
    keyword_rank_weight: float = 2.0
    # The keyword signal is the IDF-weighted share of query words a memory contains (search.py):
    # half the words matched scores half the saturation.
    keyword_rank_half: float = 0.5
    agreement_bonus: float = 0.75
    vector_bonus: float = 0.0
    # RRF is rank-only (see the module docstring), so it gets no weight unless a fit says so.
    fused_weight: float = 0.0
    fused_scale: float = 61.0  # 1 / (60 + 1): rank one in one list maps to 1.0

    def __post_init__(self) -> None:
        if not all(math.isfinite(value) for value in astuple(self)):
            raise ValueError("calibration parameters must be finite")
        if any(weight < 0 for weight in self.weights()):
            raise ValueError(f"weights must be non-negative for a monotone relevance: {self}")
        if self.keyword_rank_half <= 0 or self.fused_scale <= 0:
            raise ValueError("keyword_rank_half and fused_scale must be positive")

    def weights(self) -> tuple[float, ...]:
        """The logistic weights, in ``FEATURE_NAMES`` order."""
        return (
            self.cosine_slope,
            self.keyword_bonus,
            self.keyword_rank_weight,
            self.agreement_bonus,
            self.vector_bonus,
            self.fused_weight,
        )


DEFAULT_PARAMS = CalibrationParams()


def features(
    *,
    cosine: float | None,
    keyword_rank_score: float | None,
    in_vector: bool,
    in_keyword: bool,
    fused: float,
    params: CalibrationParams = DEFAULT_PARAMS,
) -> tuple[float, ...]:
    """The model's inputs for one candidate, in ``FEATURE_NAMES`` order.

    Out-of-range input is clamped rather than rejected, because one odd database value must not
    fail a request: cosine to [-1, 1] (None or NaN means missing), negative or NaN keyword rank
    and fused scores to 0.
    """
    cos = params.missing_cosine if cosine is None or math.isnan(cosine) else min(max(cosine, -1.0), 1.0)
    rank = _non_negative(keyword_rank_score)
    # 1 - h / (r + h) rather than r / (r + h): each step is monotone even after rounding.
    keyword_rank = 1.0 - params.keyword_rank_half / (rank + params.keyword_rank_half)
    # Capped so that an infinite score cannot meet a zero weight (inf * 0 is NaN).
    fused_feature = min(_non_negative(fused), _FUSED_CAP) * params.fused_scale
    both = float(in_vector and in_keyword)
    return (cos, float(in_keyword), keyword_rank, both, float(in_vector), fused_feature)


def keyword_only(candidate: Candidate) -> float:
    """The relevance of a full-text hit when there is no query vector (the embedder is down)."""
    return relevance(
        cosine=None,
        keyword_rank_score=candidate.keyword_coverage,
        in_vector=False,
        in_keyword=candidate.keyword_rank is not None,
        fused=candidate.rrf,
    )


def relevance(
    *,
    cosine: float | None,
    keyword_rank_score: float | None,
    in_vector: bool,
    in_keyword: bool,
    fused: float,
    params: CalibrationParams = DEFAULT_PARAMS,
) -> float:
    """Calibrated relevance in [0, 1] of one candidate (see the module docstring for the model).

    ``cosine`` is the best cosine similarity between the memory and the query or any
    hypothesis; ``keyword_rank_score`` the share of query words the memory contains
    (search.py's coverage); ``fused`` the RRF
    score. Non-decreasing in every argument (None counts as ``params.missing_cosine``).
    """
    row = features(
        cosine=cosine,
        keyword_rank_score=keyword_rank_score,
        in_vector=in_vector,
        in_keyword=in_keyword,
        fused=fused,
        params=params,
    )
    z = -params.cosine_slope * params.cosine_midpoint
    for weight, value in zip(params.weights(), row, strict=True):
        z += weight * value
    return 1.0 / (1.0 + math.exp(-min(max(z, -_Z_LIMIT), _Z_LIMIT)))


def _non_negative(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) or value < 0 else value


def params_from_fit(
    weights: npt.ArrayLike, bias: float, *, base: CalibrationParams = DEFAULT_PARAMS
) -> CalibrationParams:
    """Parameters from :func:`fit_logistic` run on rows of :func:`features` built with ``base``.

    The shape parameters (missing cosine, rank half-saturation, fused scale) are kept from
    ``base``, since the rows were built with them. A negative weight or a non-positive cosine
    weight is a ``ValueError`` (:func:`fit_params` refits without such a feature).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(FEATURE_NAMES),):
        raise ValueError(f"expected {len(FEATURE_NAMES)} weights in FEATURE_NAMES order, got shape {w.shape}")
    if w[0] <= 0:
        raise ValueError("the cosine weight must be positive")
    slope, kw_bonus, kw_rank, agreement, vector, fused = (float(x) for x in w)
    return replace(
        base,
        cosine_slope=slope,
        cosine_midpoint=-float(bias) / slope,
        keyword_bonus=kw_bonus,
        keyword_rank_weight=kw_rank,
        agreement_bonus=agreement,
        vector_bonus=vector,
        fused_weight=fused,
    )


def fit_params(
    rows: npt.ArrayLike, labels: npt.ArrayLike, *, base: CalibrationParams = DEFAULT_PARAMS, l2: float = 1e-4
) -> CalibrationParams:
    """Fit :func:`relevance` to labelled candidates, keeping every weight non-negative.

    ``rows`` are :func:`features` rows built with ``base``, ``labels`` 1 for relevant. A weight
    that comes out negative (noise on a feature that does not matter, or one that really hurts)
    is pinned to zero by dropping its column and fitting again, so the result stays monotone.
    """
    x = np.asarray(rows, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES):
        raise ValueError(f"rows must have the {len(FEATURE_NAMES)} columns of FEATURE_NAMES, got shape {x.shape}")
    active = list(range(len(FEATURE_NAMES)))
    while True:
        fitted, bias = fit_logistic(x[:, active], labels, l2=l2)
        if not active or fitted.min() >= 0:
            break
        del active[int(np.argmin(fitted))]
    weights = np.zeros(len(FEATURE_NAMES))
    weights[active] = fitted
    return params_from_fit(weights, bias, base=base)


def fit_logistic(
    features: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    l2: float = 1e-4,
    max_iter: int = 100,
    tol: float = 1e-10,
    sample_weight: npt.ArrayLike | None = None,
) -> tuple[_Array, float]:
    """Fit an L2-regularised logistic regression by Newton's method; returns (weights, bias).

    ``features`` is an (m, d) array, ``labels`` m values in {0, 1} (relevant or not). Minimises
    mean log-loss + ``l2`` / 2 * |weights|^2. The bias gets a tiny penalty of its own so that
    data with a single class still has a finite answer. Each Newton step is halved until the
    objective decreases enough (Armijo), which makes the method converge from zero for any data.
    With ``l2=0`` a constant or duplicated column makes the problem singular (``LinAlgError``).
    ``sample_weight`` (non-negative, one per row) weighs rows in the mean log-loss, e.g. so that
    each of several datasets counts the same however many rows it has.
    """
    if l2 < 0:
        raise ValueError(f"l2 must be non-negative, got {l2}")
    x, y = _check_training_data(features, labels)
    weight = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if weight.shape != y.shape or not np.isfinite(weight).all() or (weight < 0).any() or weight.sum() <= 0:
        raise ValueError("sample_weight must be one finite, non-negative weight per row, not all zero")
    weight = weight * (len(y) / weight.sum())
    design = np.hstack([x, np.ones((x.shape[0], 1))])
    penalty = np.full(design.shape[1], float(l2))
    penalty[-1] = 1e-8
    theta = np.zeros(design.shape[1])
    for _ in range(max_iter):
        gradient, hessian = _derivatives(design, y, theta, penalty, weight)
        step = np.linalg.solve(hessian, gradient)
        decrement = float(gradient @ step)
        if decrement / 2 <= tol:
            break
        loss = _loss(design, y, theta, penalty, weight)
        scale = 1.0
        while (
            scale > 1e-10 and _loss(design, y, theta - scale * step, penalty, weight) > loss - 1e-4 * scale * decrement
        ):
            scale /= 2
        theta = theta - scale * step
    return theta[:-1].copy(), float(theta[-1])


def _loss(design: _Array, y: _Array, theta: _Array, penalty: _Array, weight: _Array) -> float:
    """Weighted mean log-loss plus the L2 penalty; logaddexp keeps it finite for large |z|."""
    z = design @ theta
    return float(np.mean(weight * (np.logaddexp(0.0, z) - y * z)) + 0.5 * penalty @ theta**2)


def _derivatives(design: _Array, y: _Array, theta: _Array, penalty: _Array, weight: _Array) -> tuple[_Array, _Array]:
    """Gradient and Hessian of :func:`_loss` at ``theta``."""
    p = 0.5 * (1.0 + np.tanh(design @ theta / 2))  # the logistic function, without overflow
    m = design.shape[0]
    gradient = design.T @ (weight * (p - y)) / m + penalty * theta
    hessian = (design.T * (weight * p * (1 - p))) @ design / m + np.diag(penalty)
    return gradient, hessian


def _check_training_data(features: npt.ArrayLike, labels: npt.ArrayLike) -> tuple[_Array, _Array]:
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"need features of shape (m, d) and m labels, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isin(y, (0.0, 1.0)).all()):
        raise ValueError("features must be finite and labels 0 or 1")
    return x, y

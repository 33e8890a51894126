"""Fitting the relevance model so that it transfers: fit on some labelled sets, judge on others.

Pure numpy, no Django: ``manage.py fit_relevance`` runs the engine over each set and hands
the per-case candidates here. A :class:`SetCases` is one labelled set; each case holds the
features of its candidates (``retrieval.ranking.relevance.FEATURE_NAMES``) and which are relevant.

- :func:`fit_weights` fits the logistic weights on the candidates of the training sets, each
  set weighing the same however many candidates it has, every weight non-negative;
- :func:`choose_cut` picks ``min_score`` and ``margin`` on the training sets: the smallest
  mean shortfall from the targets for R@5 (answerable cases), negatives answered empty and
  precision of what is returned (:meth:`Figures.shortfall`), higher recall breaking ties;
- :func:`evaluate` applies a model and cut to a set the way the engine does;
- :func:`transfer_table` does all three leaving each set out in turn;
- :func:`keyword_only` turns a set into what the engine sees with the embedder down (full-text
  hits alone, the vector evidence absent), to fit the model the engine then uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from retrieval.ranking.relevance import FEATURE_NAMES, RelevanceModel, select

_Array = npt.NDArray[np.float64]

MIN_SCORES = tuple(round(float(x), 3) for x in np.arange(0.01, 0.9, 0.01))
MARGINS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8)
# What a default cut must reach on a set it was not fitted on (docs/adr/0035): answerable R@5,
# unanswerable questions answered with nothing, relevant share of what is returned.
TARGETS = {"recall_at_5": 0.9, "negatives_empty": 0.8, "precision": 0.7}
# A missed answer counts twice: an agent without the memory that answers behaves as if it
# never met the user, while an extra related memory costs some tokens of the prompt.
SHORTFALL_WEIGHTS = {"recall_at_5": 2.0, "negatives_empty": 1.0, "precision": 1.0}
TRAIN_TOP = 20  # candidates per case used for fitting: the ones a cut has to judge


@dataclass
class CaseCandidates:
    features: _Array  # (candidates, len(FEATURE_NAMES)), in the engine's candidate order
    ids: list[str]
    relevant: frozenset[str]
    # Which candidates full-text search found (a candidate with a keyword rank).
    keyword_hits: npt.NDArray[np.bool_] | None = None


@dataclass
class SetCases:
    name: str
    cases: list[CaseCandidates] = field(default_factory=list)
    # Sets without questions that have no answer cannot choose how often to answer nothing.
    has_negatives: bool = False


@dataclass(frozen=True)
class Figures:
    recall_at_5: float  # answerable cases
    negatives_empty: float  # unanswerable cases answered with nothing (nan: the set has none)
    precision: float  # relevant share of what was returned, over answerable cases that got something
    answered: int
    negatives: int

    def shortfall(self) -> float:
        """How far the figures fall short of ``TARGETS``, weighted and summed; 0 meets them all.

        The targets are floors, not things to maximise: past a target, saying nothing to one
        more unanswerable question is not worth losing an answer.
        """
        figures = {
            "recall_at_5": self.recall_at_5,
            "negatives_empty": self.negatives_empty,
            "precision": self.precision,
        }
        return float(
            sum(
                SHORTFALL_WEIGHTS[name] * max(0.0, target - figures[name])
                for name, target in TARGETS.items()
                if not np.isnan(figures[name])
            )
        )


def fit_weights(sets: Sequence[SetCases], *, l2: float = 1e-3) -> tuple[tuple[float, ...], float]:
    """Non-negative logistic weights and bias over the training sets' top candidates."""
    rows: list[_Array] = []
    labels: list[float] = []
    weights: list[float] = []
    for one in sets:
        chunk = [(c.features[:TRAIN_TOP], c.ids[:TRAIN_TOP], c.relevant) for c in one.cases if len(c.ids)]
        count = sum(len(ids) for _, ids, _ in chunk)
        for features, ids, relevant in chunk:
            rows.append(features)
            labels.extend(1.0 if i in relevant else 0.0 for i in ids)
            weights.extend([1.0 / count] * len(ids))
    x, y, w = np.vstack(rows), np.array(labels), np.array(weights)
    active = list(range(len(FEATURE_NAMES)))
    while True:
        fitted, bias = fit_logistic(x[:, active], y, l2=l2, sample_weight=w)
        if fitted.min() >= 0 or len(active) == 1:
            break
        del active[int(np.argmin(fitted))]  # a harmful or useless feature is pinned to 0
    full = np.zeros(len(FEATURE_NAMES))
    full[active] = np.maximum(fitted, 0.0)
    return tuple(round(float(v), 4) for v in full), round(float(bias), 4)


def evaluate(cases: SetCases, model: RelevanceModel, *, limit: int = 10) -> Figures:
    """What the engine would return for each case under ``model``'s cut (graph hops aside)."""
    recall, empty, precision = [], [], []
    for case in cases.cases:
        scored = [(memory_id, model.score(row)) for memory_id, row in zip(case.ids, case.features, strict=True)]
        returned = [i for i, _ in select(scored, min_score=model.min_score, margin=model.margin)][:limit]
        if case.relevant:
            recall.append(len(case.relevant & set(returned[:5])) / len(case.relevant))
            if returned:
                precision.append(len(case.relevant & set(returned)) / len(returned))
        else:
            empty.append(0.0 if returned else 1.0)
    return Figures(_mean(recall), _mean(empty), _mean(precision), len(recall), len(empty))


def choose_cut(
    sets: Sequence[SetCases], weights: tuple[float, ...], bias: float, *, require: SetCases | None = None
) -> RelevanceModel:
    """The (min_score, margin) with the smallest mean shortfall over ``sets`` (then the best recall).

    ``require`` holds cases the cut must get right whatever the sets say (the product's own
    examples: a paraphrase that must be answered, a question that must get nothing).
    """
    best: tuple[tuple[float, float], RelevanceModel] | None = None
    for min_score in MIN_SCORES:
        for margin in MARGINS:
            model = RelevanceModel(weights=weights, bias=bias, min_score=min_score, margin=margin)
            if require is not None and not _all_right(evaluate(require, model)):
                continue
            figures = [evaluate(one, model) for one in sets]
            key = (
                round(float(np.mean([f.shortfall() for f in figures])), 6),
                -float(np.mean([f.recall_at_5 for f in figures])),
            )
            if best is None or key < best[0]:
                best = (key, model)
    if best is None:
        raise ValueError("no cut answers every required example")
    return best[1]


def _all_right(figures: Figures) -> bool:
    return all(np.isnan(x) or x == 1.0 for x in (figures.recall_at_5, figures.negatives_empty))


def fit(
    train: Sequence[SetCases], *, choose_on: Sequence[SetCases] | None = None, require: SetCases | None = None
) -> RelevanceModel:
    """Weights fitted on ``train``, the cut chosen on ``choose_on`` (default: the train sets with negatives)."""
    weights, bias = fit_weights(train)
    chooser = list(choose_on) if choose_on is not None else [s for s in train if s.has_negatives] or list(train)
    model = choose_cut(chooser, weights, bias, require=require)
    names = "+".join(s.name for s in train)
    return RelevanceModel(model.weights, model.bias, model.min_score, model.margin, fitted_on=names)


@dataclass(frozen=True)
class Fold:
    held_out: str
    model: RelevanceModel
    # Per reported set: its figures and whether the set was held out of this fold's fit.
    figures: dict[str, tuple[Figures, bool]]


def transfer_table(
    fit_sets: Sequence[SetCases], report_sets: Sequence[SetCases], *, require: SetCases | None = None
) -> list[Fold]:
    """Leave each fit set out in turn: fit on the others, report every set (held-out ones marked)."""
    folds = []
    for held in fit_sets:
        model = fit([s for s in fit_sets if s is not held], require=require)
        figures = {s.name: (evaluate(s, model), s is held or all(s is not f for f in fit_sets)) for s in report_sets}
        folds.append(Fold(held_out=held.name, model=model, figures=figures))
    return folds


def keyword_only(cases: SetCases) -> SetCases:
    """``cases`` as the engine sees them with the embedder down: only the full-text hits, with the
    vector evidence (cosine, standout) absent, that is zero. A model fitted on these scores what a
    keyword match alone says about relevance: its weights for the absent features come out 0."""
    absent = [FEATURE_NAMES.index("cosine"), FEATURE_NAMES.index("standout")]
    kept = SetCases(name=f"{cases.name}:keywords", has_negatives=cases.has_negatives)
    for case in cases.cases:
        hits = case.keyword_hits if case.keyword_hits is not None else np.zeros(len(case.ids), dtype=bool)
        features = case.features[hits].copy()
        features[:, absent] = 0.0
        ids = [i for i, hit in zip(case.ids, hits, strict=True) if hit]
        kept.cases.append(CaseCandidates(features=features, ids=ids, relevant=case.relevant, keyword_hits=hits[hits]))
    return kept


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


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

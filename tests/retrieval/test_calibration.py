"""Calibrated relevance: anchors of the defaults, monotonicity, range, and fitting."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.calibration import (
    DEFAULT_MIN_SCORE,
    DEFAULT_PARAMS,
    FEATURE_NAMES,
    CalibrationParams,
    features,
    fit_logistic,
    fit_params,
    params_from_fit,
    relevance,
)


def score(
    cosine: float | None,
    keyword: float | None = None,
    *,
    in_vector: bool = True,
    in_keyword: bool = False,
    fused: float = 0.0,
    params: CalibrationParams = DEFAULT_PARAMS,
) -> float:
    return relevance(
        cosine=cosine,
        keyword_rank_score=keyword,
        in_vector=in_vector,
        in_keyword=in_keyword,
        fused=fused,
        params=params,
    )


def test_a_weak_cosine_with_no_keyword_match_scores_well_below_min_score() -> None:
    assert score(0.2) == pytest.approx(1 / (1 + math.exp(2.7)))
    assert score(0.2) < DEFAULT_MIN_SCORE / 4


def test_a_cosine_of_one_half_or_more_scores_high() -> None:
    assert score(0.5) == pytest.approx(1 / (1 + math.exp(-1.8)))
    assert score(0.5) > 0.85
    assert score(0.7) > 0.99


def test_keyword_and_vector_agreement_lifts_a_borderline_match_over_min_score() -> None:
    vector_only = score(0.3)
    both = score(0.3, 0.5, in_keyword=True)  # half the query's words, and a borderline cosine
    assert vector_only < DEFAULT_MIN_SCORE < both
    assert both == pytest.approx(1 / (1 + math.exp(-(15 * (0.3 - 0.38) + 1.0 + 2.0 * 0.5 / 1.0 + 0.75))))


def test_a_keyword_match_on_semantically_unrelated_text_stays_below_min_score() -> None:
    assert score(0.05, 0.2, in_vector=False, in_keyword=True) < DEFAULT_MIN_SCORE / 2


def test_a_solid_keyword_match_passes_when_no_cosine_is_available() -> None:
    assert score(None, 1.0, in_vector=False, in_keyword=True) > DEFAULT_MIN_SCORE
    assert score(None) == score(DEFAULT_PARAMS.missing_cosine)


def test_out_of_range_and_nan_signals_are_clamped() -> None:
    assert score(1.5) == score(1.0)
    assert score(-3.0) == score(-1.0)
    assert score(math.nan) == score(None)
    assert score(0.4, -1.0) == score(0.4, math.nan) == score(0.4, 0.0)
    assert score(0.4, fused=math.inf) == score(0.4, fused=0.0)


def test_the_rrf_score_carries_no_weight_by_default() -> None:
    assert score(0.4, fused=2 / 61) == score(0.4, fused=0.0)


def test_calibration_params_reject_negative_weights_and_non_finite_values() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        CalibrationParams(agreement_bonus=-0.1)
    with pytest.raises(ValueError, match="finite"):
        CalibrationParams(cosine_midpoint=math.nan)
    with pytest.raises(ValueError, match="positive"):
        CalibrationParams(keyword_rank_half=0.0)


weights = st.floats(min_value=0, max_value=30)
any_params = st.builds(
    CalibrationParams,
    cosine_midpoint=st.floats(min_value=-1, max_value=1),
    cosine_slope=weights,
    missing_cosine=st.floats(min_value=-1, max_value=1),
    keyword_bonus=weights,
    keyword_rank_weight=weights,
    keyword_rank_half=st.floats(min_value=1e-3, max_value=10),
    agreement_bonus=weights,
    vector_bonus=weights,
    fused_weight=weights,
)
cosines = st.floats(min_value=-1.5, max_value=1.5)
ranks = st.floats(min_value=-1, max_value=1e6)
fused_scores = st.floats(min_value=0, max_value=10)


@given(any_params, cosines, cosines, ranks, st.booleans(), st.booleans(), fused_scores)
@settings(max_examples=500)
def test_relevance_never_falls_when_the_cosine_rises(
    p: CalibrationParams, a: float, b: float, kw: float, vec: bool, key: bool, fused: float
) -> None:
    low, high = sorted((a, b))
    assert score(low, kw, in_vector=vec, in_keyword=key, fused=fused, params=p) <= score(
        high, kw, in_vector=vec, in_keyword=key, fused=fused, params=p
    )


@given(any_params, cosines, ranks, ranks, st.booleans(), st.booleans(), fused_scores)
@settings(max_examples=500)
def test_relevance_never_falls_when_the_keyword_rank_rises(
    p: CalibrationParams, cos: float, a: float, b: float, vec: bool, key: bool, fused: float
) -> None:
    low, high = sorted((a, b))
    assert score(cos, low, in_vector=vec, in_keyword=key, fused=fused, params=p) <= score(
        cos, high, in_vector=vec, in_keyword=key, fused=fused, params=p
    )


@given(any_params, cosines, ranks, st.booleans(), fused_scores, fused_scores)
@settings(max_examples=500)
def test_relevance_never_falls_when_a_flag_is_set_or_the_fused_score_rises(
    p: CalibrationParams, cos: float, kw: float, other: bool, f1: float, f2: float
) -> None:
    assert score(cos, kw, in_vector=False, in_keyword=other, params=p) <= score(
        cos, kw, in_vector=True, in_keyword=other, params=p
    )
    assert score(cos, kw, in_vector=other, in_keyword=False, params=p) <= score(
        cos, kw, in_vector=other, in_keyword=True, params=p
    )
    low, high = sorted((f1, f2))
    assert score(cos, kw, fused=low, params=p) <= score(cos, kw, fused=high, params=p)


@given(
    any_params,
    st.none() | st.floats(allow_nan=True),
    st.none() | st.floats(),
    st.booleans(),
    st.booleans(),
    st.floats(),
)
@settings(max_examples=500)
def test_relevance_is_always_between_zero_and_one(
    p: CalibrationParams, cos: float | None, kw: float | None, vec: bool, key: bool, fused: float
) -> None:
    assert 0.0 <= score(cos, kw, in_vector=vec, in_keyword=key, fused=fused, params=p) <= 1.0


def test_features_follow_feature_names() -> None:
    row = features(cosine=0.5, keyword_rank_score=0.5, in_vector=True, in_keyword=True, fused=1 / 61)
    assert dict(zip(FEATURE_NAMES, row, strict=True)) == pytest.approx(
        {"cosine": 0.5, "in_keyword": 1.0, "keyword_rank": 0.5, "agreement": 1.0, "in_vector": 1.0, "fused": 1.0}
    )


def test_fit_logistic_recovers_the_weights_that_generated_the_labels() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(20_000, 2))
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(1.5 * x[:, 0] - 2.0 * x[:, 1] + 0.5)))).astype(float)
    weights, bias = fit_logistic(x, y, l2=0.0)
    assert weights == pytest.approx([1.5, -2.0], abs=0.1)
    assert bias == pytest.approx(0.5, abs=0.1)


def test_fit_logistic_stays_finite_on_separable_and_single_class_data() -> None:
    x = np.array([[0.0], [0.1], [0.9], [1.0]])
    weights, bias = fit_logistic(x, np.array([0, 0, 1, 1]), l2=1e-2)
    assert np.isfinite(weights).all() and math.isfinite(bias)
    assert weights[0] > 0
    weights, bias = fit_logistic(x, np.ones(4))
    assert np.isfinite(weights).all() and bias > 5


def test_fit_logistic_rejects_bad_training_data() -> None:
    with pytest.raises(ValueError, match="shape"):
        fit_logistic(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="labels 0 or 1"):
        fit_logistic(np.zeros((2, 1)), np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match="finite"):
        fit_logistic(np.array([[math.nan]]), np.array([1.0]))


def test_fit_params_recovers_the_parameters_that_labelled_the_data() -> None:
    rng = np.random.default_rng(11)
    n = 40_000
    columns = zip(
        rng.uniform(-0.2, 0.9, n), rng.exponential(0.06, n), rng.random(n) < 0.7, rng.random(n) < 0.4, strict=True
    )
    signals = [
        {"cosine": float(c), "keyword_rank_score": float(k) if m else None, "in_vector": bool(v), "in_keyword": bool(m)}
        for c, k, v, m in columns
    ]
    rows = np.array([features(**s, fused=0.0) for s in signals])
    labels = np.array([rng.random() < relevance(**s, fused=0.0) for s in signals], dtype=float)
    fitted = fit_params(rows, labels, l2=1e-6)
    assert fitted.cosine_midpoint == pytest.approx(0.38, abs=0.02)
    assert fitted.cosine_slope == pytest.approx(15.0, rel=0.1)
    assert fitted.agreement_bonus == pytest.approx(0.75, abs=0.3)
    assert 0.0 <= fitted.vector_bonus < 0.2
    assert fitted.fused_weight == 0.0


def test_params_from_fit_refuses_weights_that_would_break_monotonicity() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        params_from_fit([10.0, -1.0, 0.0, 0.0, 0.0, 0.0], -3.0)
    with pytest.raises(ValueError, match="cosine weight"):
        params_from_fit([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], -3.0)
    with pytest.raises(ValueError, match="6 weights"):
        params_from_fit([1.0], 0.0)
    fitted = params_from_fit([15.0, 1.0, 2.0, 0.75, 0.0, 0.0], -15.0 * 0.38)
    assert fitted == replace(DEFAULT_PARAMS, cosine_midpoint=fitted.cosine_midpoint)
    assert fitted.cosine_midpoint == pytest.approx(0.38)


def test_fit_params_pins_a_harmful_feature_to_zero_instead_of_going_non_monotone() -> None:
    rng = np.random.default_rng(3)
    cos = rng.uniform(-0.2, 0.9, 5_000)
    in_vector = rng.random(5_000) < 0.5
    # Relevant when the cosine is high, and less often when vector search found it.
    labels = (rng.random(5_000) < 1 / (1 + np.exp(-(12 * (cos - 0.4) - 1.0 * in_vector)))).astype(float)
    rows = [
        features(cosine=c, keyword_rank_score=None, in_vector=bool(v), in_keyword=False, fused=0.0)
        for c, v in zip(cos, in_vector, strict=True)
    ]
    fitted = fit_params(rows, labels)
    assert fitted.vector_bonus == 0.0
    assert min(fitted.weights()) >= 0.0

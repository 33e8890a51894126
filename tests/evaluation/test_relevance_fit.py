"""The logistic fit behind the relevance models: it recovers known weights and stays finite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.relevance_fit import Figures, fit_logistic


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


def test_a_missed_answer_counts_twice_in_the_shortfall() -> None:
    short_of_recall = Figures(recall_at_5=0.8, negatives_empty=0.8, precision=0.7, answered=10, negatives=5)
    short_of_empty = Figures(recall_at_5=0.9, negatives_empty=0.7, precision=0.7, answered=10, negatives=5)
    assert short_of_recall.shortfall() == pytest.approx(0.2)
    assert short_of_empty.shortfall() == pytest.approx(0.1)
    assert (
        Figures(recall_at_5=0.95, negatives_empty=float("nan"), precision=0.8, answered=1, negatives=0).shortfall() == 0
    )

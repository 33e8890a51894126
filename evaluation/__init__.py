"""Offline retrieval evaluation: datasets, metrics, baselines and reports.

Pure Python with no Django import, so it runs without a database: a runner feeds each
``Case`` to the engine, turns the answer into a ``CaseResult`` with ``Dataset.result_for``,
and hands the results to ``summarise``, ``compare`` and ``render_html``.
"""

from __future__ import annotations

from evaluation.baselines import baselines_for_corpus, compare, load_baselines
from evaluation.datasets import (
    Case,
    ChatMessage,
    CorpusItem,
    Dataset,
    DatasetError,
    Link,
    load_golden,
    load_locomo,
)
from evaluation.metrics import (
    GOLDEN_THRESHOLDS,
    CaseResult,
    all_at_k,
    failed_thresholds,
    hit_at_k,
    mrr,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    summarise,
)
from evaluation.report import render_html, write_json

__all__ = [
    "GOLDEN_THRESHOLDS",
    "Case",
    "CaseResult",
    "ChatMessage",
    "CorpusItem",
    "Dataset",
    "DatasetError",
    "Link",
    "all_at_k",
    "baselines_for_corpus",
    "compare",
    "failed_thresholds",
    "hit_at_k",
    "load_baselines",
    "load_golden",
    "load_locomo",
    "mrr",
    "ndcg_at_k",
    "precision_at_k",
    "recall_at_k",
    "render_html",
    "summarise",
    "write_json",
]

"""Reciprocal rank fusion of several rankings, for fusing in Python what SQL does not.

The hybrid SQL statement fuses keyword and vector search itself; this is the same formula for
rankings that only exist in Python (one vector ranking per HyDE hypothesis) and for tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_K = 60


@dataclass(frozen=True)
class FusedHit:
    """One fused result: its RRF score and its 1-based rank in each ranking that had it."""

    id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Fuse rankings (source name -> ids, best first) with reciprocal rank fusion.

    score(id) = sum over sources of weight(source) / (k + rank), rank 1-based; a source missing
    from ``weights`` weighs 1. An id repeated within one ranking counts at its best rank.
    Results are ordered by score, then best single rank, then id, so equal inputs always give
    the same order whatever the order of ``rankings``.
    """
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    weight_of = dict(weights or {})
    if any(not math.isfinite(w) or w < 0 for w in weight_of.values()):
        raise ValueError("weights must be finite and non-negative")
    ranks: dict[str, dict[str, int]] = {}
    for source in sorted(rankings):
        for position, item_id in enumerate(rankings[source], start=1):
            ranks.setdefault(item_id, {}).setdefault(source, position)
    hits = [
        # fsum is exact before its one rounding, so equal sums of equal terms compare equal.
        FusedHit(item_id, math.fsum(weight_of.get(s, 1.0) / (k + r) for s, r in by_source.items()), by_source)
        for item_id, by_source in ranks.items()
    ]
    hits.sort(key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.id))
    return hits

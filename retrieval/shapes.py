"""What a retrieve is asked (``RetrieveRequest``), what it records on the way (``Trace``) and what
it answers (``RetrieveResult`` of ``Hit``s and episodes): the shapes :mod:`retrieval.engine` works on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memories.models import Memory
from retrieval.ranking import episodes, relevance
from retrieval.ranking.search import Candidate


@dataclass
class RetrieveRequest:
    user_id: str
    query: str | None = None
    messages: list[dict[str, Any]] | None = None
    turn_id: str | None = None
    limit: int = 10
    token_budget: int | None = None
    min_score: float | None = None
    kinds: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    hyde: bool | None = None
    hop_depth: int = 1
    include_superseded: bool = False
    judge: bool | None = None
    # The user's captured messages are searched beside memories (``retrieval.ranking.episodes``).
    episodes: bool = True
    # The user's profile (``profiles/``) starts the injection.
    profile: bool = True
    # The playground asks on an end user's behalf: it neither spends their rate limit nor
    # writes to their retrieval log.
    rate_limited: bool = True
    logged: bool = True


@dataclass
class Trace:
    """What happened, stage by stage: the response's diagnostics and the playground's view."""

    correlation_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    hypotheses: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    # Per candidate, the relevance model's evidence (None when the embedder was down).
    evidence: dict[str, relevance.Evidence] = field(default_factory=dict)
    # What the LLM judge kept, when it ran (None: it did not run).
    judged: list[str] | None = None
    # Items above the cut that cannot hold the kind of answer the query asks for.
    unanswering: list[str] = field(default_factory=list)
    graph_paths: dict[str, tuple[str, str]] = field(default_factory=dict)
    excluded_ids: list[str] = field(default_factory=list)
    skipped_words: list[str] = field(default_factory=list)
    # The min_score the candidates were cut at (None until scoring ran) and the relative cut.
    threshold: float | None = None
    margin: float = 0.0
    # The cut actually applied: the larger of the threshold and margin × the best score.
    cut: float | None = None
    query: str = ""
    # The relevance model's background for this query's vectors (None: the embedder was down).
    background: relevance.Background | None = None

    def timed(self, stage: str, started: float) -> None:
        self.timings[stage] = round((time.perf_counter() - started) * 1000, 2)


@dataclass(frozen=True)
class Hit:
    """One memory in the answer: the row (with its relations loaded), its score, how it was found,
    and its older versions (newest first) when it supersedes others."""

    memory: Memory
    score: float
    matched_by: tuple[str, ...] = ()
    chain: tuple[Memory, ...] = ()


@dataclass
class RetrieveResult:
    """What :func:`retrieve` answers; ``retrieval.schemas.retrieve_out`` turns it into the API body."""

    memories: list[Hit] = field(default_factory=list)
    episodes: list[episodes.Episode] = field(default_factory=list)
    injection: str = ""
    token_count: int = 0
    truncated: bool = False
    cached: bool = False
    degraded: list[str] = field(default_factory=list)
    hypotheses: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    correlation_id: str = ""
    # The profile as injected: version, text, token_count, facts (None: none injected).
    profile: dict[str, Any] | None = None

    def cache_entry(self) -> dict[str, Any]:
        """What the per-turn cache keeps: ids and scores, not rows (see :func:`_from_cache`)."""
        return {
            "hits": [
                {"id": str(h.memory.pk), "score": h.score, "matched_by": list(h.matched_by)} for h in self.memories
            ],
            "episodes": [{"id": e.id, "score": e.score, "matched_by": list(e.matched_by)} for e in self.episodes],
            "injection": self.injection,
            "token_count": self.token_count,
            "truncated": self.truncated,
            "profile": self.profile,
        }

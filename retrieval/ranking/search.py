"""The hybrid search, run: full text + pgvector, fused by reciprocal rank fusion, in the two
statements of ``search_sql`` (KEYWORD_SQL, then FUSION_SQL). This module sends each after the
search's settings in one pipelined round trip, as prepared statements, and ends the settings with
the search; embeds the query while Postgres runs the full-text statement
(docs/adr/0033-embed-on-the-request-thread.md); picks the nearest rows from the web process's own
copy of the caller's two vector groups when it holds them (``retrieval.vectors.resident_vectors``,
docs/adr/0026), else has Postgres read them, each group exactly or by the filtered HNSW walk
(docs/adr/0023-filtered-hnsw-walk.md, 0024); and turns the rows into :class:`Candidate` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

import numpy as np
from django.db import connection, transaction

from common import prepared
from memories.fields import vector_literal
from memories.models import Project
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.ranking.search_sql import KEYWORD_SQL, SETTINGS_SQL, fusion_sql
from retrieval.vectors import resident_vectors
from retrieval.vectors.memory_vectors import active_model

_T = TypeVar("_T")

# Words capture writes into nearly every memory ("The user prefers…", "The team decided…").
# Until a user has enough memories for word counts (keyword_stats.py), they would make every
# memory a keyword match for every question that says "the user": they weigh nothing and are
# not searched. With counts, the IDF cut takes care of them (and of any other common word).
BOILERPLATE_LEXEMES = ("user", "team")
# Measured by bench_retrieve's recall check (top 10 vs an exact search, 100k memories).
HNSW_EF_SEARCH = 400
# A group of vectors (a user's own, the project's shared) up to this size is searched exactly
# instead of by the filtered HNSW walk. On 100k different memories over 10 users (2 cores): the
# exact read of a user's 10,000 full vectors 6.6 ms, the walk 9.4 ms at ef_search 400 and 99.25 %
# equal to the exact top 10 (docs/adr/0024-exact-read-up-to-20000.md); the half-precision copies
# cut the read by ~40 %. The walk grows as the group's share of the index falls.
VECTOR_EXACT_MAX_ROWS = 20_000
# Rows an exact read picks by the half-precision copies beyond what the search keeps, before the
# full vectors order them: the copy moves a cosine distance by ~1e-3 at most, enough to swap
# neighbours but not to push one 20 places. 100k memories, 200 questions: the top 60 so chosen and
# re-ranked were the exact top 60, in the same order, every time.
HALF_SPARE = 20
# Rows the filtered HNSW walk fetches beyond the search depth, for the memory-level filters
# applied after it when the request names no kinds or categories: status and expiry remove few
# of the nearest rows (a superseded version, an expired one). 100k memories: the fusion statement
# 4.5 -> 3.4 ms at p50 against twice the depth, the same fused top ten.
VECTOR_SPARE = 10


def settings_params(timeout_ms: int | None) -> dict[str, str | None]:
    """SETTINGS_SQL's parameters; ``timeout_ms`` None keeps the session's statement timeout."""
    return {"timeout": None if timeout_ms is None else str(timeout_ms), "ef_search": str(HNSW_EF_SEARCH)}


@contextmanager
def search_settings(cursor: Any, *, timeout_ms: int | None = None) -> Iterator[None]:
    """The search's settings (SETTINGS_SQL) for the statements run inside the block, for callers
    that run their own statements under them (``bench_retrieve``'s exact search, the plan tests).

    Call inside a transaction. The role is put back explicitly when the block ends: a
    transaction-local setting would otherwise last until an enclosing transaction ends.
    """
    cursor.execute(SETTINGS_SQL, settings_params(timeout_ms))
    role = cursor.fetchone()[0]
    try:
        yield
    finally:
        if role != "none":
            cursor.execute("SELECT set_config('role', %s, true)", [role])


@contextmanager
def _settings_scope() -> Iterator[None]:
    """Where the search's transaction-local settings end.

    Outside a transaction, each of the search's two round trips (SETTINGS_SQL and a statement,
    pipelined: ``_with_settings``) is its own implicit transaction: the settings end with it, the
    role included, even on an error; no BEGIN, COMMIT or role reset to wait for. Inside one (a
    caller's ``atomic`` block, the tests), the search runs in a savepoint that is rolled back at the
    end: it only reads, and the rollback puts every setting back.
    """
    if not connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def _with_settings(
    statement: str, params: dict[str, Any], meanwhile: Callable[[], _T] | None = None
) -> tuple[list[tuple[Any, ...]], _T | None]:
    """``statement``'s rows, run after SETTINGS_SQL in one round trip and one transaction, both as
    prepared statements (``common.prepared``: planned once per connection; the two statements'
    planning was ~1.2 ms of Postgres CPU a search at 100k memories), and
    what ``meanwhile`` returned: it runs on this thread once both are sent, while Postgres executes
    them (in pipeline mode the server runs what it has received before the rows are asked for). It
    must not use the connection, which is in the middle of the pipeline."""
    with prepared.cursor() as settings_cursor, prepared.cursor() as cursor, prepared.pipeline():
        settings_cursor.execute(_sent(SETTINGS_SQL), params)
        cursor.execute(_sent(statement), params)
        during = meanwhile() if meanwhile is not None else None
        return list(cursor.fetchall()), during


@cache
def _sent(statement: str) -> str:
    """``statement`` as sent: without comment lines and indentation (they stay here, in the
    source). Under 4 kB, psycopg keeps how it split the text around the parameters (its
    ``MAX_CACHED_STATEMENT_LENGTH``); at 5 kB with the comments it split it again on every call:
    ~0.15 ms of the web worker's CPU a search."""
    lines = (line.strip() for line in statement.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("--"))


@dataclass(frozen=True)
class SearchParams:
    project_id: int
    user_id: str
    query: str
    model: str
    # Rows 0..query_vectors-1 embed the query (and its conversation context); the rest
    # are HyDE hypotheses, ranked and fused the same way but reported as "hyde".
    vectors: np.ndarray | None
    query_vectors: int = 1
    statuses: Sequence[str] = ("active",)
    kinds: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    depth: int = 50
    # Full text skips query words in more than this share of the visible memories (1.0: none)
    # and, rarest first, words beyond this many estimated matching memories (None: no limit).
    max_keyword_share: float = 1.0
    keyword_row_budget: int | None = None
    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    hyde_weight: float = 1.0


@dataclass
class Candidate:
    """One memory the search found, with every signal that explains why."""

    memory_id: str
    rrf: float
    keyword_rank: int | None = None
    keyword_score: float | None = None
    vector_rank: int | None = None
    hyde_rank: int | None = None
    cosine: float | None = None
    hyde_cosine: float | None = None
    keyword_coverage: float | None = None
    matched_by: list[str] = field(default_factory=list)


@dataclass
class SearchResult:
    candidates: list[Candidate]
    # Query words full text left out as too common (known only when something was found).
    skipped_words: list[str] = field(default_factory=list)


def hybrid_search(
    params: SearchParams,
    *,
    timeout_ms: int | None = None,
    pending_vectors: Callable[[], np.ndarray | None] | None = None,
) -> SearchResult:
    """Full text, then vectors and the fusion, each statement in one round trip with the search's
    settings (``_settings_scope``); candidates ordered by fused RRF score.

    ``pending_vectors`` computes the query vectors; it is called on this thread once the full-text
    statement, which needs none, is sent, so the query is embedded while Postgres runs that
    statement, with no thread to wake (docs/adr/0033-embed-on-the-request-thread.md). Without it,
    ``params.vectors`` are used (None: full text only).
    """
    sql_params: dict[str, Any] = {
        "project": params.project_id,
        "user": params.user_id,
        "query": params.query[:8192],
        "model": params.model,
        "statuses": list(params.statuses),
        "kinds": list(params.kinds) if params.kinds else None,
        "categories": list(params.categories) if params.categories else None,
        "depth": params.depth,
        "vector_fetch": vector_fetch(params),
        "max_share": params.max_keyword_share,
        "row_budget": params.keyword_row_budget,
        "keyword_weight": params.keyword_weight,
        "vector_weight": params.vector_weight,
        "hyde_weight": params.hyde_weight,
        "query_vectors": params.query_vectors,
        "boilerplate": list(BOILERPLATE_LEXEMES),
    } | settings_params(timeout_ms)
    with _settings_scope(), connection.cursor() as cursor:
        hits, vectors = _with_settings(KEYWORD_SQL, sql_params, meanwhile=pending_vectors)
        if pending_vectors is None:
            vectors = params.vectors
        if vectors is None:
            vectors = np.zeros((0, 1), dtype=np.float32)
        sql_params |= keyword_arrays(hits)
        own_rows, shared_rows, own_generation, shared_generation = hits[0][5:9] if hits else (None,) * 4
        own_exact, shared_exact = reads_exactly(own_rows), reads_exactly(shared_rows)
        held = None
        if len(vectors) and resident_vectors.enabled():
            held = _resident_groups(
                cursor, params, vectors, (own_generation, shared_generation), (own_rows, shared_rows)
            )
        if held is not None:
            picked = resident_vectors.pick(*held, user_id=params.user_id, queries=vectors, fetch=vector_fetch(params))
            sql_params |= {
                "near_ords": array_literal(picked.ords),
                "near_ids": array_literal(picked.ids),
                "near_distances": array_literal(picked.distances),
            }
        else:
            sql_params |= {
                "vectors": array_literal(f'"{vector_literal(row)}"' for row in vectors),
                "own_fetch": group_fetch(params, exact=own_exact),
                "shared_fetch": group_fetch(params, exact=shared_exact),
            }
        statement = fusion_sql(
            int(vectors.shape[1]), own_exact=own_exact, shared_exact=shared_exact, given=held is not None
        )
        rows, _ = _with_settings(statement, sql_params)
    if held is not None and rows:
        # The candidates' cosines from the same copy: in Postgres, reading their ~100 vectors again
        # was about half of the fusion statement's time.
        found = resident_vectors.cosines(
            *held, ids=[row[0] for row in rows], queries=vectors, query_vectors=params.query_vectors
        )
        rows = [(*row[:6], cosine, hyde, row[8]) for row, (cosine, hyde) in zip(rows, found, strict=True)]
    # Skipped words as before the split: reported when the search found anything at all.
    skipped = list(hits[0][4]) if rows and hits else []
    return SearchResult(candidates=[_candidate(row) for row in rows], skipped_words=skipped)


def _resident_groups(
    cursor: Any,
    params: SearchParams,
    vectors: np.ndarray,
    generations: tuple[int | None, int | None],
    sizes: tuple[int | None, int | None],
) -> tuple[resident_vectors.Group, resident_vectors.Group] | None:
    """This process's copy of the caller's two groups, their own and the shared (brought up to date
    first when it holds another generation); None when a group cannot be used (Postgres reads
    them instead). ``sizes`` are the groups' sizes from the word statistics (None: small)."""
    owners = (params.user_id, resident_vectors.SHARED)
    groups = [
        resident_vectors.group(
            cursor,
            project_id=params.project_id,
            model=params.model,
            owner=owner,
            generation=generation,
            dimension=int(vectors.shape[1]),
            rows=size,
        )
        for owner, generation, size in zip(owners, generations, sizes, strict=True)
    ]
    own, shared = groups
    if own is None or shared is None:
        return None
    return own, shared


def group_fetch(params: SearchParams, *, exact: bool) -> int:
    """Rows a group yields per query vector: what the walk fetches (``vector_fetch``), and
    ``HALF_SPARE`` more from an exact read, whose half-precision order the full vectors then correct."""
    return vector_fetch(params) + (HALF_SPARE if exact else 0)


def reads_exactly(group_rows: int | None) -> bool:
    """Whether a group of ``group_rows`` vectors (None: fewer than the keyword statistics count,
    ``MEMORYHUB_KEYWORD_STATS_MIN_ROWS``) is read exactly rather than walked."""
    return group_rows is None or group_rows <= VECTOR_EXACT_MAX_ROWS


def vector_fetch(params: SearchParams) -> int:
    """Rows the HNSW walk fetches per query vector: ``depth`` and a few spare, or twice ``depth``
    when the request narrows kinds or categories (those filters may drop most of the nearest rows)."""
    return params.depth * 2 if params.kinds or params.categories else params.depth + VECTOR_SPARE


def keyword_arrays(hits: Sequence[tuple[Any, ...]]) -> dict[str, str]:
    """KEYWORD_SQL's rows as the arrays FUSION_SQL takes (its one row without a hit left out)."""
    hits = [hit for hit in hits if hit[0] is not None]
    return {
        "kw_ids": array_literal(hit[0] for hit in hits),
        "kw_scores": array_literal(hit[1] for hit in hits),
        "kw_ranks": array_literal(hit[2] for hit in hits),
        "kw_coverage": array_literal(hit[3] for hit in hits),
    }


def array_literal(values: Iterable[str | float | None]) -> str:
    """Postgres's text form of a one-dimensional array (``{a,b,NULL}``) of numbers, ids or
    double-quoted vector literals, none of which needs escaping; None is NULL.

    One string for psycopg to quote: a list it dumps element by element in Python, and the
    fusion statement's 200 keyword values took 0.33 ms a search to send instead of 0.05
    (measured at 100k memories). A float's ``str`` reads back as the same float8.
    """
    return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"


def _candidate(row: tuple[Any, ...]) -> Candidate:
    memory_id, rrf, kw_rank, kw_score, vector_rank, hyde_rank, cosine, hyde_cosine, coverage = row
    matched_by = [
        name for name, rank in (("keyword", kw_rank), ("vector", vector_rank), ("hyde", hyde_rank)) if rank is not None
    ]
    return Candidate(
        memory_id=memory_id,
        rrf=float(rrf),
        keyword_rank=kw_rank,
        keyword_score=None if kw_score is None else float(kw_score),
        vector_rank=vector_rank,
        hyde_rank=hyde_rank,
        cosine=None if cosine is None else float(cosine),
        hyde_cosine=None if hyde_cosine is None else float(hyde_cosine),
        keyword_coverage=None if coverage is None else float(coverage),
        matched_by=matched_by,
    )


def vector_search(*, project: Project, user_id: str, query: str, limit: int = 10) -> tuple[str, list[Candidate]]:
    """Vector-only search (used to check model switches): the model used and its hits.

    The model is read once; the query is embedded with it and searched against its
    vectors only, so a model switch mid-search cannot mix two models' vectors.
    """
    model = active_model(project)
    vectors = embed_texts([query], embedder=embedder_for_model(model))
    params = SearchParams(project_id=project.pk, user_id=user_id, query="", model=model, vectors=vectors, depth=limit)
    return model, hybrid_search(params).candidates

"""The hybrid search: full text + pgvector, fused by reciprocal rank fusion, in two SQL
statements kept here, each sent after the search's settings in one round trip (the search
stays one reviewable query):
KEYWORD_SQL, the full-text half, which needs no query vector and so runs while the engine
embeds the query, and FUSION_SQL, the vector half, the fusion and the exact cosines, which
takes the full-text hits as arrays. Split in two for that overlap only (docs/adr/0033-embed-on-the-request-thread.md);
read together they are the one hybrid query.

Visibility is part of the statement: the user's ``user``-scope memories and the
project's ``project``-scope ones, with the wanted statuses, not expired. Vector search
reads two groups, the user's own vectors and the project's shared ones. The web process
picks their nearest rows from its own copy of both (``retrieval.vectors.resident_vectors``, at the
generation the keyword statement reads) and the fusion statement takes them as arrays (the
candidates' cosines then come from the same copy, ``COSINES_GIVEN``); when it cannot hold a
group, Postgres reads both (``NEAREST_READ``): a group of up to ``VECTOR_EXACT_MAX_ROWS`` exactly
(by each vector's half-precision copy, the user's own from ``embedding_owner_half`` alone, then
ordered by the full vectors), a larger one by a walk of the active model's partial HNSW index
with pgvector's iterative scan, so a per-user filter still yields enough rows (plain HNSW +
WHERE silently returns too few); ``bench_retrieve`` checks the walk's top 10 against an exact
search (docs/adr/0023-filtered-hnsw-walk.md, 0024, 0026).
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
from memories.selectors import visible_sql
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.vectors import resident_vectors
from retrieval.vectors.memory_vectors import active_model

_T = TypeVar("_T")

RRF_K = 60
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


def _wanted(alias: str) -> str:
    """The request's filters on rows "alias" that carry a memory's status, expiry, kind and category:
    the memory itself or its words' rows (memories_memoryterm, which copy them)."""
    return f"""
    {alias}.status = ANY(%(statuses)s)
    AND ({alias}.expires_at IS NULL OR {alias}.expires_at > now())
    AND (%(kinds)s::text[] IS NULL OR {alias}.kind = ANY(%(kinds)s::text[]))
    AND (%(categories)s::text[] IS NULL OR {alias}.category = ANY(%(categories)s::text[]))
"""


# The memories a caller may see; "m" is memories_memory.
_VISIBLE = f"""
    m.project_id = %(project)s
    AND {visible_sql("m")}
    AND {_wanted("m")}"""

# The same rule on a memory's words' rows ("t"); KEYWORD_SQL's two arms name the owner themselves.
_TERM_VISIBLE = _wanted("t")

# Words of a hit whose terms KEYWORD_SQL adds inline (more go through memories_rank_sum).
RANK_INLINE = 8


def _running_sum(terms: int) -> str:
    """ts_rank's sum of the word terms in the array "w", in tsrank.c's order, up to ``terms`` of
    them, as one expression: each step in double precision, rounded to single (a missing term adds
    0, which rounds to the sum itself). A few casts a hit; an aggregate of SQL steps cost ~1 us a
    word, more than the expression costs."""
    total = "w[1]::real"
    for term in range(2, terms + 1):
        total = f"({total}::float8 + coalesce(w[{term}], 0))::real"
    return total


_RANK_INLINE = _running_sum(RANK_INLINE)

KEYWORD_SQL = f"""
WITH query_lexemes AS (
    SELECT tsvector_to_array(to_tsvector('english', %(query)s)) AS lexemes
),
-- The word statistics of the two groups the caller sees (keyword_stats.py): the user's own
-- memories and the project's shared ones. A group below the statistics' minimum has none.
group_stats AS (
    SELECT id, owner, rows FROM retrieval_keywordstats
    WHERE project_id = %(project)s AND owner IN (%(user)s, '')
),
-- Share of the memories the caller can see that contain each query word, from the groups'
-- statistics; NULL when unknown.
lexeme_share AS (
    SELECT w.lexeme,
           coalesce(sum(cl.docs), 0)::float / nullif(sum(ks.rows), 0) AS share,
           coalesce(sum(cl.docs), 0) AS docs,
           -- IDF-style weight (words below the stored one per cent count as in one memory); 1 for all
           -- words when there are no statistics.
           coalesce(ln(1 + sum(ks.rows)::float / (greatest(sum(cl.docs), 1) + 0.5)),
                    CASE WHEN w.lexeme = ANY(%(boilerplate)s::text[]) THEN 0 ELSE 1 END) AS weight
    FROM query_lexemes, unnest(lexemes) AS w(lexeme)
    LEFT JOIN group_stats ks ON true
    LEFT JOIN retrieval_commonlexeme cl ON cl.stats_id = ks.id AND cl.lexeme = w.lexeme
    GROUP BY w.lexeme
),
-- The words full text searches. Not the common ones (share above max_share): without IDF
-- they rank nothing, and each matching row costs a check. Of the rest, rarest first, only
-- as many as their summed counts fit the row budget (the rarest always). Words without
-- statistics are searched, except the boilerplate capture writes into nearly every memory.
searched AS (
    SELECT lexeme,
           (share IS NULL AND weight > 0) OR (
               share <= %(max_share)s AND (
                   %(row_budget)s::int IS NULL
                   OR sum(docs) OVER (ORDER BY share, lexeme) <= %(row_budget)s::int
                   OR row_number() OVER (ORDER BY share, lexeme) = 1
               )
           ) AS searched
    FROM lexeme_share
),
-- The memories the caller can see that contain a searched word, from the words' rows
-- (memories_memoryterm: each memory's words with its visibility beside them, kept by triggers): a
-- user's own memories, then the project's shared ones of other users, each arm an index-only scan.
-- The memory table is read only by key, for the hits kept (below); through the GIN index every
-- matching row was read, ~500 rows from as many heap blocks (docs/adr/0040).
term_hits AS (
    SELECT t.memory_id AS id, t.lexeme, t.weight
    FROM searched s JOIN memories_memoryterm t ON t.lexeme = s.lexeme
    WHERE s.searched AND t.project_id = %(project)s AND t.user_id = %(user)s AND {_TERM_VISIBLE}
    UNION ALL
    SELECT t.memory_id, t.lexeme, t.weight
    FROM searched s JOIN memories_memoryterm t ON t.lexeme = s.lexeme
    WHERE s.searched AND t.project_id = %(project)s AND t.scope = 'project' AND t.user_id <> %(user)s
      AND {_TERM_VISIBLE}
),
-- ts_rank of an OR of the searched words (default weights, no normalisation), to the last bit: the
-- words' terms (memories_term_weight) added as tsrank.c adds them, in its order of the query's
-- words (their bytes' order: COLLATE "C"), each sum rounded to single precision, then divided by the
-- number of searched words. The first {RANK_INLINE} terms are added inline, more by memories_rank_sum.
-- Not ts_rank_cd: on an OR query cover density costs more and ranked worse on LoCoMo. Ties share
-- a rank (here and for vectors): breaking them by id, a random UUID, made fused scores differ from
-- one load to the next.
scored AS (
    SELECT id, (CASE WHEN cardinality(w) <= {RANK_INLINE} THEN {_RANK_INLINE}
                     ELSE (SELECT memories_rank_sum(x ORDER BY i) FROM unnest(w) WITH ORDINALITY u(x, i)) END
                ::float8 / (SELECT count(*) FROM searched WHERE searched))::real AS kw_score
    FROM (SELECT id, array_agg(weight ORDER BY lexeme COLLATE "C") AS w
          FROM term_hits GROUP BY id) terms
),
keyword AS (
    SELECT k.id, m.search, k.kw_score, k.kw_rank
    FROM (SELECT id, kw_score, rank() OVER (ORDER BY kw_score DESC) AS kw_rank
          FROM scored
          ORDER BY kw_score DESC, id
          LIMIT %(depth)s) k
    JOIN memories_memory m ON m.id = k.id
),
-- Share of the query's words each keyword hit contains, each word weighted by its IDF
-- weight: unlike ts_rank it means the same for a two-word and a twenty-word query, so
-- the relevance model can use it. Computed on the (at most depth) hits, from their memories' rows (every
-- query word counts, the skipped ones too).
keyword_hits AS (
    SELECT k.id, k.kw_score, k.kw_rank,
           (SELECT coalesce(sum(ls.weight) FILTER (WHERE k.search @@ quote_literal(ls.lexeme)::tsquery), 0)
                   / nullif(sum(ls.weight), 0)
            FROM lexeme_share ls) AS coverage
    FROM keyword k
)
-- At least one row: the skipped words, and the sizes of the two groups the vector half searches
-- (the user's memories, the project's shared ones; NULL below the statistics' minimum) and their
-- vectors' generations (memories_vectorgroup; NULL: never a vector), are wanted even when full
-- text finds nothing.
SELECT k.id::text, k.kw_score, k.kw_rank, k.coverage, s.skipped, s.user_rows, s.shared_rows,
       s.own_generation, s.shared_generation
FROM (SELECT ARRAY(SELECT lexeme FROM searched WHERE NOT searched ORDER BY lexeme) AS skipped,
             (SELECT rows FROM group_stats WHERE owner = %(user)s) AS user_rows,
             (SELECT rows FROM group_stats WHERE owner = '') AS shared_rows,
             (SELECT generation FROM memories_vectorgroup
              WHERE project_id = %(project)s AND model = %(model)s AND owner = %(user)s) AS own_generation,
             (SELECT generation FROM memories_vectorgroup
              WHERE project_id = %(project)s AND model = %(model)s AND owner = '') AS shared_generation) s
LEFT JOIN keyword_hits k ON true
"""

# FUSION_SQL's nearest rows, read by Postgres (each group exactly or by a walk; {own_order} and
# {shared_order} say which) or given by the web process (``retrieval.vectors.resident_vectors``).
NEAREST_READ = """
-- The query vectors, materialized so each is parsed once, not once per row it is compared with;
-- "h" is its unit-length half-precision copy, compared with the stored ones
-- (memories_embedding.vector_half). Only here: given nearest rows come with their cosines.
query_vectors AS MATERIALIZED (
    SELECT ord, v::vector({dim}) AS v, l2_normalize(v::vector({dim}))::halfvec({dim}) AS h
    FROM unnest(%(vectors)s::text[]) WITH ORDINALITY AS t(v, ord)
),
-- Nearest neighbours per query vector in the two groups a user sees: their own memories, and
-- the project's shared ones (scope 'project') of other users. A group of at most
-- VECTOR_EXACT_MAX_ROWS is read exactly, in half precision ("+ 0" hides the ordering from the
-- HNSW index), the user's own vectors from embedding_owner_half alone (an index-only scan),
-- HALF_SPARE rows more than wanted. A larger one is a filtered walk of the
-- model's HNSW index with pgvector's iterative scan (the engine sets hnsw.iterative_scan and
-- ef_search), which keeps going until it has enough of the group's rows. Either way the rows are
-- then ranked by their full vectors: the exact cosine distance orders them, not the copy.
-- Over-fetched (vector_fetch), then the memory-level filters (status, expiry, kind, category) apply.
-- Materialized: each group is read once per query vector, whatever the join below (on small
-- tables the planner would otherwise read them again for every memory row).
nearest_rows AS MATERIALIZED (
    SELECT qv.ord, c.id, c.d
    FROM query_vectors qv
    CROSS JOIN LATERAL (
        SELECT e.memory_id AS id, e.vector::vector({dim}) <=> qv.v AS d
        FROM (
            (SELECT e.memory_id AS id
             FROM memories_embedding e
             WHERE e.model = %(model)s AND e.project_id = %(project)s AND e.user_id = %(user)s
             ORDER BY {own_order}
             LIMIT %(own_fetch)s)
            UNION ALL
            (SELECT e.memory_id
             FROM memories_embedding e
             WHERE e.model = %(model)s AND e.project_id = %(project)s
               AND e.scope = 'project' AND e.user_id <> %(user)s
             ORDER BY {shared_order}
             LIMIT %(shared_fetch)s)
        ) groups
        JOIN memories_embedding e ON e.memory_id = groups.id AND e.model = %(model)s
        -- "+ 0": never a walk of the HNSW index joined to the groups (it could stop short of them).
        ORDER BY (e.vector::vector({dim}) <=> qv.v) + 0
        LIMIT %(vector_fetch)s
    ) c
),
"""
NEAREST_GIVEN = """
-- Nearest neighbours per query vector, picked by the web process from its copy of the two groups
-- (retrieval.vectors.resident_vectors: the same rows by the same exact distance), with their distances.
nearest_rows AS MATERIALIZED (
    SELECT * FROM unnest(%(near_ords)s::bigint[], %(near_ids)s::uuid[], %(near_distances)s::float8[]) AS c(ord, id, d)
),
"""

# The vector half and the fusion: the full-text hits come in as arrays from KEYWORD_SQL.
FUSION_SQL = f"""
WITH keyword_hits AS (
    SELECT * FROM unnest(%(kw_ids)s::uuid[], %(kw_scores)s::float8[], %(kw_ranks)s::bigint[], %(kw_coverage)s::float8[])
        AS k(id, kw_score, kw_rank, coverage)
),
{{nearest_rows}}
nearest AS (
    SELECT c.ord, c.id, c.d
    FROM nearest_rows c
    JOIN memories_memory m ON m.id = c.id
    WHERE {_VISIBLE}
),
ranked AS (
    SELECT id, ord, d, rank() OVER (PARTITION BY ord ORDER BY d) AS rank FROM nearest
),
-- One row per memory with its best rank among the query vectors and among the
-- hypotheses, and its vector RRF contribution (ranks beyond depth contribute nothing).
per_memory AS (
    SELECT id,
           min(rank) FILTER (WHERE ord <= %(query_vectors)s) AS vector_rank,
           min(rank) FILTER (WHERE ord > %(query_vectors)s) AS hyde_rank,
           sum(CASE WHEN rank > %(depth)s THEN 0
                    WHEN ord <= %(query_vectors)s THEN %(vector_weight)s / ({RRF_K} + rank)
                    ELSE %(hyde_weight)s / ({RRF_K} + rank) END) AS vector_rrf
    FROM ranked
    GROUP BY id
),
fused AS (
    SELECT coalesce(p.id, k.id) AS id,
           coalesce(p.vector_rrf, 0) + coalesce(%(keyword_weight)s / ({RRF_K} + k.kw_rank), 0) AS rrf,
           k.kw_rank, k.kw_score,
           CASE WHEN p.vector_rank <= %(depth)s THEN p.vector_rank END AS vector_rank,
           CASE WHEN p.hyde_rank <= %(depth)s THEN p.hyde_rank END AS hyde_rank,
           k.coverage
    FROM per_memory p
    FULL JOIN keyword_hits k ON k.id = p.id
    WHERE k.id IS NOT NULL OR p.vector_rank <= %(depth)s OR p.hyde_rank <= %(depth)s
){{cosines}}
"""
# FUSION_SQL's end: every candidate with its exact cosines, read by Postgres (after NEAREST_READ, whose
# query_vectors it compares), or left to the web process when it picked the nearest rows
# (``resident_vectors.cosines``, from the same copy).
COSINES_READ = """
-- Exact cosines for every candidate, keyword-only hits too (relevance needs them): one
-- pass over the candidates' vectors by memory id, not a subquery per candidate (under the
-- tenant role's row policy a correlated lookup planned as a scan of the project's vectors).
cosines AS (
    SELECT e.memory_id AS id,
           1 - min(e.vector::vector({dim}) <=> qv.v) FILTER (WHERE qv.ord <= %(query_vectors)s) AS cosine,
           1 - min(e.vector::vector({dim}) <=> qv.v) FILTER (WHERE qv.ord > %(query_vectors)s) AS hyde_cosine
    FROM memories_embedding e, query_vectors qv
    WHERE e.memory_id = ANY(ARRAY(SELECT id FROM fused)) AND e.model = %(model)s
    GROUP BY e.memory_id
)
SELECT f.id::text, f.rrf, f.kw_rank, f.kw_score, f.vector_rank, f.hyde_rank, c.cosine, c.hyde_cosine, f.coverage
FROM fused f
LEFT JOIN cosines c ON c.id = f.id
ORDER BY f.rrf DESC, f.id
"""
COSINES_GIVEN = """
-- The cosines come from the web process's copy of the vectors (retrieval.vectors.resident_vectors.cosines).
SELECT f.id::text, f.rrf, f.kw_rank, f.kw_score, f.vector_rank, f.hyde_rank, NULL::float8, NULL::float8, f.coverage
FROM fused f
ORDER BY f.rrf DESC, f.id
"""


# The search's settings, one SELECT. Filtered HNSW: pgvector 0.8's iterative scan keeps walking the
# graph until enough of the caller's rows are found; without it a per-user WHERE silently returns
# too few. The tenant role (common/row_security.py) is left: under a row policy Postgres may not
# evaluate a qual whose operator is not leakproof (``@@``) before the policy, so the full-text GIN
# index could not be used and every row of the user was read (100k memories: ~50 ms a search
# instead of ~12; the HNSW walk, an ORDER BY, was not affected). The statements name the project
# in every table they read (``_VISIBLE``, the embedding and keyword-statistics filters). All are
# transaction-local (``set_config(..., true)``); the first column is the role before.
SETTINGS_SQL = """SELECT current_setting('role'),
       set_config('statement_timeout', coalesce(%(timeout)s, current_setting('statement_timeout')), true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s, true),
       set_config('role', 'none', true)"""


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


@cache
def fusion_sql(dim: int, *, own_exact: bool, shared_exact: bool, given: bool = False) -> str:
    """FUSION_SQL for ``dim``-dimensional vectors: the nearest rows ``given`` as arrays (picked by the
    web process), or read by Postgres, each group exactly (by its half-precision copies) or by the HNSW
    walk (a few texts per process, kept: every search asks for one)."""
    exact = f"(e.vector_half::halfvec({dim}) <=> qv.h) + 0"
    walk = f"e.vector::vector({dim}) <=> qv.v"
    nearest = (
        NEAREST_GIVEN
        if given
        else NEAREST_READ.format(
            dim=dim, own_order=exact if own_exact else walk, shared_order=exact if shared_exact else walk
        )
    )
    # A comma before the cosines CTE; the select of the given cosines follows ``fused`` directly.
    cosines = "\n" + COSINES_GIVEN.strip("\n") if given else ",\n" + COSINES_READ.format(dim=dim).strip("\n")
    return FUSION_SQL.format(dim=dim, nearest_rows=nearest.strip("\n"), cosines=cosines)


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

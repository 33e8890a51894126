"""The hybrid search's SQL: full text + pgvector, fused by reciprocal rank fusion, in two
statements kept here (the search stays one reviewable query; ``search`` runs them, each after the
search's settings, ``SETTINGS_SQL``, in one round trip):
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
group, Postgres reads both (``NEAREST_READ``): a group of up to ``search.VECTOR_EXACT_MAX_ROWS`` exactly
(by each vector's half-precision copy, the user's own from ``embedding_owner_half`` alone, then
ordered by the full vectors), a larger one by a walk of the active model's partial HNSW index
with pgvector's iterative scan, so a per-user filter still yields enough rows (plain HNSW +
WHERE silently returns too few); ``bench_retrieve`` checks the walk's top 10 against an exact
search (docs/adr/0023-filtered-hnsw-walk.md, 0024, 0026).
"""

from __future__ import annotations

from functools import cache

from memories.selectors import visible_sql

RRF_K = 60


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

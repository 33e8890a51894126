"""The hybrid search's two statements are queries whose predicates the indexes serve.

Here Postgres reads the vectors itself: the process's resident copy (``retrieval.vectors.resident_vectors``,
tested in ``test_resident_vectors.py``) is off for every test of this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from pgvector import Vector

from common import row_security
from memories import services
from memories.fields import vector_literal
from memories.models import GIN_PENDING_LIST_KB
from retrieval.ranking.search import (
    BOILERPLATE_LEXEMES,
    VECTOR_EXACT_MAX_ROWS,
    array_literal,
    keyword_arrays,
    reads_exactly,
    search_settings,
)
from retrieval.ranking.search_sql import KEYWORD_SQL, NEAREST_READ, fusion_sql
from retrieval.vectors.vector_index import index_sql
from tests.support.search import statements_containing, stored


@pytest.fixture(autouse=True)
def postgres_reads_the_vectors(settings):
    settings.MEMORYHUB_RESIDENT_VECTORS_MB = 0


# The fusion statement as a user with fewer than VECTOR_EXACT_MAX_ROWS memories gets it.
EXACT_FUSION = fusion_sql(384, own_exact=True, shared_exact=True)


def statement_params(project_id: int) -> dict[str, Any]:
    return {
        "project": project_id,
        "user": "alice",
        "query": "deploy kubernetes",
        "model": "all-MiniLM-L6-v2",
        "vectors": [Vector(np.ones(384, dtype=np.float32)).to_text()],
        "statuses": ["active"],
        "kinds": None,
        "categories": None,
        "depth": 50,
        "vector_fetch": 60,
        "own_fetch": 80,
        "shared_fetch": 80,
        "max_share": 0.1,
        "row_budget": 1000,
        "keyword_weight": 1.0,
        "vector_weight": 1.0,
        "hyde_weight": 1.0,
        "query_vectors": 1,
        "boilerplate": list(BOILERPLATE_LEXEMES),
    }


def fusion_params(cursor: Any, project_id: int) -> dict[str, Any]:
    """The second statement's parameters: the first one's full-text hits as arrays."""
    params = statement_params(project_id)
    cursor.execute(KEYWORD_SQL, params)
    return params | keyword_arrays(cursor.fetchall())


def explain(project_id: int) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        # Test tables are tiny, so the planner would rightly scan them; forbid that to see
        # whether the statement's predicates can use the indexes at all.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + KEYWORD_SQL, statement_params(project_id))
        plans = [row[0] for row in cursor.fetchall()]
        cursor.execute("EXPLAIN " + EXACT_FUSION, fusion_params(cursor, project_id))
        return "\n".join(plans + [row[0] for row in cursor.fetchall()])


def test_explain_reads_memories_and_vectors_only_through_indexes(make_memory, api):
    make_memory(content="Alice deploys with Kubernetes.")
    plan = explain(api.project.pk)
    assert "Seq Scan on memories_memory" not in plan
    assert "Seq Scan on memories_embedding" not in plan
    assert "Seq Scan on retrieval_commonlexeme" not in plan
    assert plan.count("Index Scan") + plan.count("Bitmap Index Scan") >= 3


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def test_each_candidates_vector_is_read_once_under_the_tenant_role(make_memory, api):
    # Correlated per-candidate lookups planned as a scan of the project's vectors per candidate
    # under the row policy (45 ms a call on LoCoMo); the statement reads them in one pass.
    for number in range(12):
        make_memory(content=f"Alice deploys service {number} with Kubernetes.")
    assert row_security.enter(api.project.pk)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + EXACT_FUSION, fusion_params(cursor, api.project.pk))
            plan = cursor.fetchone()[0][0]["Plan"]
    finally:
        row_security.leave()
    reads = [n for n in plan_nodes(plan) if n.get("Relation Name") == "memories_embedding"]
    assert reads and all(n["Actual Loops"] == 1 for n in reads), [
        (n["Node Type"], n.get("Index Name"), n["Actual Loops"]) for n in reads
    ]


def test_full_text_reads_the_words_rows_by_index_and_the_memory_table_only_for_its_hits(make_memory, api):
    # Through the GIN index the statement read every matching memory's row from the wide memory
    # table (~500 rows in as many heap blocks at 100k memories) and ranked its tsvector; now the
    # words' rows (memories_memoryterm) rank them, and the table is read by key for the hits kept.
    # Analysed with enough rows: the plan must not depend on statistics earlier tests left.
    enough_memories_for_the_indexes(make_memory, api)
    for number in range(5):
        make_memory(content=f"Alice deploys service {number} with Kubernetes.")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + KEYWORD_SQL, statement_params(api.project.pk))
        plan = cursor.fetchone()[0][0]["Plan"]
    nodes = list(plan_nodes(plan))
    terms = {n.get("Index Name") for n in nodes if n.get("Relation Name") == "memories_memoryterm"}
    assert terms == {"memoryterm_user_lexeme", "memoryterm_shared_lexeme"}
    memories = [n for n in nodes if n.get("Relation Name") == "memories_memory"]
    assert memories and all(n.get("Index Name") == "memories_memory_pkey" for n in memories)
    assert not any("ts_rank" in output for n in nodes for output in n.get("Output", []))


def enough_memories_for_the_indexes(make_memory: Any, api: Any) -> None:
    """400 of Alice's memories and one about Kubernetes, analysed: enough rows that the planner,
    told the real counts, reads full-text hits through the words' index rather than the user's rows."""
    drafts = [services.MemoryDraft(user_id="alice", content=f"Alice note {n} about lunch.") for n in range(400)]
    services.memory_bulk_create(project=api.project, drafts=drafts, actor="system:test")
    make_memory(content="Alice deploys with Kubernetes.")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("ANALYZE memories_memoryterm")


def test_under_the_tenant_role_the_search_still_uses_its_indexes_and_the_role_comes_back(make_memory, api):
    # A row policy forbids evaluating a non-leakproof qual (@@, still in the coverage of the hits)
    # before the policy, and adds its own check to every row read; the search leaves the role for its
    # statement and puts it back.
    enough_memories_for_the_indexes(make_memory, api)
    assert row_security.enter(api.project.pk)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            with search_settings(cursor):
                cursor.execute("SET LOCAL enable_seqscan = off")
                cursor.execute("EXPLAIN " + KEYWORD_SQL, statement_params(api.project.pk))
                plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("SELECT current_user")
            role = cursor.fetchone()[0]
    finally:
        row_security.leave()
    assert "Index Only Scan using memoryterm_user_lexeme" in plan
    assert role == row_security.ROLE


def fusion_plan(project_id: int, statement: str, *, sort: bool = True) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        params = fusion_params(cursor, project_id)
        # Tiny tables the tests never vacuum: no page is marked all-visible, so an index-only scan
        # would visit every heap row and the planner may as well take a bitmap scan of the same
        # index. Forbid both ways around the question asked: which index, and read how.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        if not sort:  # on a test's few rows a sort is cheaper than any walk
            cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_users_own_vectors_are_read_exactly_from_the_owner_index_alone(api):
    # Up to VECTOR_EXACT_MAX_ROWS a user's vectors are searched exactly, by their half-precision
    # copies in embedding_owner_half (index-only), and the project's shared ones through their
    # partial index; neither the HNSW walk nor a scan of the project's vectors (LoCoMo: 1.5 -> 0.2 ms).
    stored(api.project, "bob", [f"Bob note {n} about lunch." for n in range(300)])
    stored(api.project, "alice", [f"Alice deploys service {n}." for n in range(5)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_embedding")
    plan = fusion_plan(api.project.pk, EXACT_FUSION)
    assert "Index Only Scan using embedding_owner_half" in plan, plan
    assert "embedding_project_scope" in plan
    assert "embedding_hnsw" not in plan


def test_a_group_larger_than_the_exact_size_is_walked_through_the_hnsw_index(api):
    with connection.cursor() as cursor:  # as the sweeper builds it once a group is that large (vector_index)
        cursor.execute(*index_sql("all-MiniLM-L6-v2", 384, concurrently=False))
    stored(api.project, "alice", ["Alice deploys."])
    plan = fusion_plan(api.project.pk, fusion_sql(384, own_exact=False, shared_exact=False), sort=False)
    assert plan.count("Index Scan using embedding_hnsw") == 2  # the user's own, the project's shared
    # Read exactly, no group can take the walk, whatever the planner is told.
    assert "embedding_hnsw" not in fusion_plan(api.project.pk, EXACT_FUSION, sort=False)


def test_a_group_is_read_exactly_up_to_the_exact_size_or_without_statistics():
    assert reads_exactly(None) and reads_exactly(0) and reads_exactly(VECTOR_EXACT_MAX_ROWS)
    assert not reads_exactly(VECTOR_EXACT_MAX_ROWS + 1)


def test_the_walk_fetches_a_few_spare_rows_or_twice_the_depth_when_kinds_or_categories_narrow_it():
    from retrieval.ranking.search import VECTOR_SPARE, SearchParams, vector_fetch

    plain = SearchParams(project_id=1, user_id="alice", query="q", model="m", vectors=None, depth=50)
    assert vector_fetch(plain) == 50 + VECTOR_SPARE
    assert vector_fetch(SearchParams(**{**plain.__dict__, "kinds": ["preference"]})) == 100
    assert vector_fetch(SearchParams(**{**plain.__dict__, "categories": ["work"]})) == 100
    assert "LIMIT %(vector_fetch)s" in NEAREST_READ


def test_new_rows_wait_in_a_short_pending_list_that_every_full_text_search_reads(project):
    """GIN's fast update parks new rows in a pending list that each search of the memory list reads whole. Postgres's
    4 MB default let it grow to hundreds of pages under a steady stream of captures; the index is
    set to flush at 64 kB (eight pages); at the default these 800 memories left 45 pages pending."""
    words = [
        "deploy",
        "kubernetes",
        "ledger",
        "invoice",
        "harbour",
        "violin",
        "orchard",
        "glacier",
        "falcon",
        "copper",
        "meadow",
        "lantern",
    ]
    drafts = [
        services.MemoryDraft(
            user_id=f"user-{n % 7}", content=f"Note {n}: " + " ".join(words[n % 12 :] + words[: n % 12])
        )
        for n in range(800)
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('memory_user_search_gin'::regclass)")  # other tests' rows
        services.memory_bulk_create(project=project, drafts=drafts[:400], actor="test")
        services.memory_bulk_create(project=project, drafts=drafts[400:], actor="test")
        cursor.execute("SELECT gin_clean_pending_list('memory_user_search_gin'::regclass)")
        (pending_pages,) = cursor.fetchone()
    assert pending_pages <= GIN_PENDING_LIST_KB // 8 + 1


def test_the_keyword_hits_and_vectors_reach_the_fusion_statement_as_sent(db):
    """The arrays go as one literal each (``array_literal``), not as lists psycopg dumps element by
    element; Postgres must read back the very values: ids, ranks, float4 scores as float8, a
    missing coverage, the smallest numbers, and each query vector."""
    first, second = "0b8a3e6c-0d7e-4b6f-9a43-2f1d5a7c9e01", "7f3c2a10-5b9d-4e8f-a1c2-d3e4f5a6b7c8"
    hits = [(first, 0.0607927143573761, 1, 0.5, []), (second, 1e-20, 2, None, []), (None, None, None, None, ["the"])]
    vectors = [np.full(384, 0.1, dtype=np.float32), np.arange(384, dtype=np.float32) / 7]
    sent = keyword_arrays(hits) | {"vectors": array_literal(f'"{vector_literal(vector)}"' for vector in vectors)}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k.id::text, k.s, k.r, k.c FROM unnest(%(kw_ids)s::uuid[], %(kw_scores)s::float8[],"
            " %(kw_ranks)s::bigint[], %(kw_coverage)s::float8[]) AS k(id, s, r, c)",
            sent,
        )
        assert cursor.fetchall() == [(first, 0.0607927143573761, 1, 0.5), (second, 1e-20, 2, None)]
        cursor.execute("SELECT v::vector(384)::text FROM unnest(%(vectors)s::text[]) AS t(v)", sent)
        read = [Vector.from_text(row[0]).to_numpy() for row in cursor.fetchall()]
        assert len(read) == 2 and all(np.array_equal(a, b) for a, b in zip(read, vectors, strict=True))
    assert keyword_arrays([(None, None, None, None, [])]) == dict.fromkeys(
        ("kw_ids", "kw_scores", "kw_ranks", "kw_coverage"), "{}"
    )


def test_the_search_reads_each_group_by_its_size_from_the_word_statistics(api):
    from retrieval.models import KeywordStats
    from retrieval.ranking.search import SearchParams, hybrid_search

    stored(api.project, "alice", ["Alice deploys with Kubernetes."])

    def arms() -> tuple[bool, bool]:
        """Whether the user's own group and the shared one were read exactly, in the last search."""
        own, shared = statements[-1][0].split("nearest_rows AS MATERIALIZED", 1)[1].split("UNION ALL", 1)
        return ("qv.h) + 0" in own, "qv.h) + 0" in shared.split(") groups", 1)[0])

    params = SearchParams(
        project_id=api.project.pk,
        user_id="alice",
        query="deploys",
        model="all-MiniLM-L6-v2",
        vectors=np.ones((1, 384), dtype=np.float32),
    )
    with statements_containing("nearest_rows") as statements:
        found = hybrid_search(params).candidates
        assert arms() == (True, True)  # no statistics: small groups
        KeywordStats.objects.create(project=api.project, owner="alice", rows=VECTOR_EXACT_MAX_ROWS + 1)
        assert [c.memory_id for c in hybrid_search(params).candidates] == [c.memory_id for c in found]
        assert arms() == (False, True)
        KeywordStats.objects.create(project=api.project, owner="", rows=VECTOR_EXACT_MAX_ROWS + 1)
        hybrid_search(params)
        assert arms() == (False, False)


def test_each_vector_has_a_unit_length_half_precision_copy_that_follows_it_and_stays_in_its_row(make_memory):
    """``vector_half`` is Postgres's (a stored generated column): unit length, so values beyond
    halfvec's range (65504) still store, and rewritten with the vector. The full vector stays in
    the row (``toast_tuple_target``): the search re-reads it for every row it ranks."""
    from memories.models import Embedding, Memory
    from retrieval.vectors.memory_vectors import store_vectors

    memory = Memory.objects.get(pk=make_memory(content="Alice deploys with Kubernetes.")["id"])
    raw = np.arange(1, 385, dtype=np.float32) * 1000  # up to 384,000: no halfvec holds it as is
    store_vectors([memory], raw[None, :], model="test-model")
    embedding = Embedding.objects.get(memory=memory, model="test-model")
    half = np.asarray(list(embedding.vector_half), dtype=np.float32)
    assert np.allclose(half, raw / np.linalg.norm(raw), atol=1e-3)
    assert abs(np.linalg.norm(half) - 1) < 1e-3
    Embedding.objects.filter(pk=embedding.pk).update(vector=vector_literal(np.eye(384, dtype=np.float32)[3] * -2))
    embedding.refresh_from_db()
    assert list(embedding.vector_half)[3] == -1 and sum(map(abs, list(embedding.vector_half))) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_toast_chunk_id(vector) FROM memories_embedding WHERE id = %s", [embedding.pk])
        assert cursor.fetchone() == (None,)


def test_the_exact_read_ranks_by_the_full_vectors_as_an_exact_search_does(api):
    """The half-precision copies pick a user's nearest rows; the full vectors order them. On 432
    real memories the search's vector ranks are those of an exact float32 search, row for row."""
    from retrieval.embedding.embedders import embedder_for_model
    from retrieval.embedding.vector_cache import embed_texts
    from retrieval.ranking.search import SearchParams, hybrid_search

    topics = ["deploys", "cooks", "reads about", "plays", "writes", "repairs", "paints", "studies"]
    things = ["Kubernetes", "pasta", "the violin", "old bicycles", "Rust", "a garden", "chess", "jazz", "glaciers"]
    contents = [
        f"Alice {topic} {thing} on day {n}."
        for n, (topic, thing) in enumerate((t, h) for t in topics for h in things for _ in range(6))
    ]
    stored(api.project, "alice", contents)
    query = embed_texts(["What does Alice do with music?"], embedder=embedder_for_model("all-MiniLM-L6-v2"))
    found = hybrid_search(
        SearchParams(
            project_id=api.project.pk, user_id="alice", query="", model="all-MiniLM-L6-v2", vectors=query, depth=50
        )
    ).candidates
    by_rank = sorted((c.vector_rank, c.memory_id) for c in found if c.vector_rank is not None)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_id::text, rank() OVER (ORDER BY vector::vector(384) <=> %s::vector(384))"
            " FROM memories_embedding WHERE project_id = %s AND user_id = 'alice' ORDER BY 2 LIMIT 50",
            [vector_literal(query[0]), api.project.pk],
        )
        exact = [(rank, memory_id) for memory_id, rank in cursor.fetchall()]
    assert len(exact) == 50 and sorted(by_rank) == sorted(exact)


def test_the_statements_are_sent_short_enough_for_psycopg_to_keep_their_split():
    """Sent without comments and indentation, each statement is below psycopg's cache limit, so the
    text is split around its parameters once per process, not on every search."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    from retrieval.ranking.search import _sent
    from retrieval.ranking.search_sql import SETTINGS_SQL

    statements = [SETTINGS_SQL, KEYWORD_SQL] + [
        fusion_sql(dim, own_exact=own, shared_exact=shared, given=given)
        for dim in (384, 768)
        for own in (True, False)
        for shared in (True, False)
        for given in (True, False)
    ]
    for statement in statements:
        message = _sent(statement)
        assert len(message.encode()) <= MAX_CACHED_STATEMENT_LENGTH
        assert "--" not in message and "  " not in message


def generic_plan(statement: str) -> str:
    """The plan Postgres keeps for ``statement`` prepared (common.prepared), for any parameters:
    ``EXPLAIN (GENERIC_PLAN)`` with each named parameter as a numbered one."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the tables are tiny, as in explain()
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + re.sub(r"%\((\w+)\)s", numbered, statement).replace("%%", "%"))
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_plans_kept_for_any_parameters_use_the_indexes_too(make_memory, api):
    # After five runs a prepared statement may keep one plan for every user and question; that plan
    # must still find the full-text hits through the user's words (memoryterm_user_lexeme) and the
    # rows by their keys.
    enough_memories_for_the_indexes(make_memory, api)
    keyword = generic_plan(KEYWORD_SQL)
    assert "memoryterm_user_lexeme" in keyword
    assert "Seq Scan on memories_memory" not in keyword
    fusion = generic_plan(fusion_sql(384, own_exact=True, shared_exact=True, given=True))
    assert "Seq Scan on memories_memory" not in fusion
    assert "Seq Scan on memories_embedding" not in fusion

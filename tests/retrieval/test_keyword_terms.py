"""Full text reads each memory's words from ``memories_memoryterm``, which Postgres keeps beside the
memories (migration ``memories/0017``): the rows follow every write, and the search ranks and finds
what ``ts_rank`` over the memories themselves would."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from common import row_security
from memories import lifecycle, services
from memories.models import Memory, MemoryTerm, Project, Status
from memoryhub import erasure
from retrieval.ranking.keyword_stats import settle_after_bulk_load
from retrieval.ranking.search import BOILERPLATE_LEXEMES, search_settings
from retrieval.ranking.search_sql import KEYWORD_SQL, RANK_INLINE

COPIED = ("project_id", "user_id", "scope", "status", "kind", "category", "expires_at")


def terms_of(memory: Memory) -> dict[str, tuple[Any, ...]]:
    """The memory's words as stored, each with the memory's columns the row copies and its weight."""
    return {
        t.lexeme: (*(getattr(t, column) for column in COPIED), t.weight)
        for t in MemoryTerm.objects.filter(memory_id=memory.pk)
    }


def expected_terms(memory: Memory) -> dict[str, tuple[Any, ...]]:
    """What the rows should say, from the memory as stored now and Postgres's own tsvector."""
    memory.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w.lexeme, memories_term_weight(coalesce(array_length(w.positions, 1), 1))"
            " FROM memories_memory m, unnest(m.search) w WHERE m.id = %s",
            [memory.pk],
        )
        weights = dict(cursor.fetchall())
    copied = tuple(getattr(memory, column) for column in COPIED)
    return {lexeme: (*copied, weight) for lexeme, weight in weights.items()}


def draft(content: str, user_id: str = "alice", **fields: Any) -> services.MemoryDraft:
    return services.MemoryDraft(user_id=user_id, content=content, **fields)


def test_a_memorys_words_follow_its_inserts_edits_and_status(project):
    one = services.memory_create(project=project, draft=draft("Alice deploys Kubernetes clusters."), actor="t")
    many = services.memory_bulk_create(
        project=project, drafts=[draft(f"Bob repairs bicycle {n} and bicycles.", "bob") for n in range(3)], actor="t"
    )
    for memory in [one, *many]:
        assert terms_of(memory) == expected_terms(memory) and terms_of(memory)
    assert "bicycl" in terms_of(many[0]) and "kubernet" in terms_of(one)

    services.memory_edit(memory=one, changes={"content": "Alice writes Rust services."}, actor="t")
    assert set(terms_of(one)) == {"alic", "write", "rust", "servic"} and terms_of(one) == expected_terms(one)

    later = timezone.now() + timedelta(days=3)
    services.memory_edit(
        memory=one, changes={"kind": "preference", "category": "coding-preferences", "expires_at": later}, actor="t"
    )
    Memory.objects.filter(pk=one.pk).update(scope="project")  # no service changes it; a statement may
    assert terms_of(one) == expected_terms(one)
    assert {row[2:6] for row in terms_of(one).values()} == {("project", "active", "preference", "coding-preferences")}

    lifecycle.memory_archive(memory=one, actor="t")
    assert {row[3] for row in terms_of(one).values()} == {Status.ARCHIVED}
    newer = services.memory_supersede(memory=many[0], draft=draft("Bob sells bicycles now.", "bob"), actor="t")
    assert {row[3] for row in terms_of(many[0]).values()} == {Status.SUPERSEDED}
    assert terms_of(newer) == expected_terms(newer)


def test_an_unchanged_save_leaves_the_words_alone_and_deletes_take_them(project):
    memory = services.memory_create(project=project, draft=draft("Alice deploys Kubernetes."), actor="t")
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM memories_memoryterm WHERE memory_id = %s", [memory.pk])
        written = cursor.fetchall()
        Memory.objects.filter(pk=memory.pk).update(embedding_status="ready", importance=0.9)
        cursor.execute("SELECT xmin::text FROM memories_memoryterm WHERE memory_id = %s", [memory.pk])
        assert cursor.fetchall() == written  # not rewritten: nothing they copy changed

    bob = services.memory_create(project=project, draft=draft("Bob cooks pasta.", "bob"), actor="t")
    erasure.erase_user(project=project, user_id="alice")
    assert not MemoryTerm.objects.filter(memory_id=memory.pk).exists()
    assert terms_of(bob) == expected_terms(bob)


def test_a_truncate_of_the_memories_empties_the_words(transactional_db, project):
    services.memory_create(project=project, draft=draft("Alice deploys Kubernetes."), actor="t")
    assert MemoryTerm.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memories_memory CASCADE")
    assert not MemoryTerm.objects.exists()


def test_writes_under_the_tenant_role_keep_the_words_of_their_project_only(api, other_api, make_memory):
    # An API write runs as the tenant role (row_security.py); the triggers write under its policy.
    mine = make_memory(content="Alice deploys Kubernetes.")
    theirs = other_api.post("/memories", {"user_id": "alice", "content": "Alice bakes sourdough."}).json()
    assert (
        api.patch(f"/memories/{mine['id']}", {"user_id": "alice", "content": "Alice deploys Nomad."}).status_code == 200
    )
    assert set(MemoryTerm.objects.filter(memory_id=mine["id"]).values_list("lexeme", flat=True)) == {
        "alic",
        "deploy",
        "nomad",
    }
    if not row_security.available():
        pytest.skip("no tenant role on this database")
    assert row_security.enter(api.project.pk)
    try:
        visible = set(MemoryTerm.objects.values_list("memory_id", flat=True))
    finally:
        row_security.leave()
    assert {str(m) for m in visible} == {mine["id"]} and theirs["id"] not in {str(m) for m in visible}


@pytest.mark.parametrize("positions", [1, 2, 3, 5, 8, 13, 40, 255, 256, 300])
def test_a_words_weight_is_its_ts_rank_to_the_last_bit(db, positions):
    # One query word: ts_rank is that word's weight alone, in single precision.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ts_rank(v, 'kubernet'::tsquery), memories_term_weight(array_length(w.positions, 1))::real"
            " FROM to_tsvector('english', repeat('kubernetes and ', %s)) v, unnest(v) w WHERE w.lexeme = 'kubernet'",
            [positions],
        )
        rank, weight = cursor.fetchone()
    assert rank == weight


# ts_rank over the memory table, as the search ranked before memories_memoryterm: the visible
# memories containing any of the words, ranked by ts_rank of their OR.
REFERENCE = """
SELECT m.id::text, ts_rank(m.search, q) AS score, rank() OVER (ORDER BY ts_rank(m.search, q) DESC)
FROM memories_memory m, to_tsquery('simple', %(words)s) q
WHERE m.search @@ q AND m.project_id = %(project)s AND (m.user_id = %(user)s OR m.scope = 'project')
  AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
ORDER BY score DESC, m.id
LIMIT 50
"""


def keyword_params(project: Project, user_id: str, query: str) -> dict[str, Any]:
    """KEYWORD_SQL's parameters for ``user_id``'s ``query``, every word searched (no share cut, no budget)."""
    return {
        "project": project.pk,
        "user": user_id,
        "query": query,
        "model": "all-MiniLM-L6-v2",
        "statuses": ["active"],
        "kinds": None,
        "categories": None,
        "depth": 50,
        "max_share": 1.0,
        "row_budget": None,
        "boilerplate": list(BOILERPLATE_LEXEMES),
    }


def keyword_hits(project: Project, user_id: str, query: str) -> tuple[list[tuple[str, float, int]], list[str]]:
    """The search's full-text hits (id, score, rank) in rank order, and the words it searched."""
    with connection.cursor() as cursor, search_settings(cursor):
        cursor.execute(KEYWORD_SQL, keyword_params(project, user_id, query))
        rows = cursor.fetchall()
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [query])
        words = [w for w in cursor.fetchone()[0] if w not in BOILERPLATE_LEXEMES]
    hits = sorted(((r[0], r[1], r[2]) for r in rows if r[0] is not None), key=lambda h: (h[2], h[0]))
    return hits, words


def test_the_search_finds_and_ranks_what_ts_rank_over_the_memories_does(project):
    rng = random.Random(7)
    vocabulary = [
        "kubernetes",
        "pasta",
        "violin",
        "bicycle",
        "rust",
        "garden",
        "chess",
        "jazz",
        "glacier",
        "ledger",
        "harbour",
        "falcon",
    ]
    drafts = []
    for n in range(600):
        # Words repeated, so their weights differ; some shared, some expired, some archived.
        words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 24))]
        user = rng.choice(["alice", "bob"])
        scope = "project" if n % 7 == 0 else "user"
        expires = timezone.now() - timedelta(days=1) if n % 11 == 0 else None
        drafts.append(draft(f"Note {n}: " + " ".join(words), user, scope=scope, expires_at=expires))
    memories = services.memory_bulk_create(project=project, drafts=drafts, actor="t")
    for memory in memories[::13]:
        lifecycle.memory_archive(memory=memory, actor="t")
    everything = " ".join(vocabulary)  # hits with more words than the search adds inline (RANK_INLINE)
    queries = [
        "kubernetes",
        "violin and jazz",
        "rust, chess or glacier?",
        "falcon ledger harbour pasta bicycle",
        everything,
    ]
    for query in queries:
        for user in ("alice", "bob"):
            hits, words = keyword_hits(project, user, query)
            with connection.cursor() as cursor:
                cursor.execute(REFERENCE, {"words": " | ".join(words), "project": project.pk, "user": user})
                reference = cursor.fetchall()
            assert len(reference) == 50 and hits == reference  # ids, ranks and scores, to the last bit
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM memories_memoryterm"
            " WHERE lexeme = ANY(tsvector_to_array(to_tsvector('english', %s))) GROUP BY memory_id) c",
            [everything],
        )
        assert cursor.fetchone()[0] > RANK_INLINE


def test_after_a_bulk_load_settles_the_words_are_read_without_visiting_their_table(transactional_db, project):
    # Index-only scans visit the table for every row on a page not yet marked all-visible (as after
    # the first writes): settle_after_bulk_load vacuums, as autovacuum does after 1 % new rows here.
    drafts = [draft(f"Alice deploys service {n} with Kubernetes.") for n in range(300)]
    services.memory_bulk_create(project=project, drafts=drafts, actor="t")

    def heap_fetches() -> int:
        params = keyword_params(project, "alice", "kubernetes")
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_bitmapscan = off")
            try:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + KEYWORD_SQL, params)
                plan = cursor.fetchone()[0][0]["Plan"]
            finally:
                cursor.execute("RESET enable_seqscan")
                cursor.execute("RESET enable_bitmapscan")

        def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
            return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]

        scans = [n for n in nodes(plan) if n.get("Index Name") == "memoryterm_user_lexeme"]
        assert scans and all(n["Node Type"] == "Index Only Scan" for n in scans)
        return sum(n["Heap Fetches"] for n in scans)

    assert heap_fetches() >= 300
    settle_after_bulk_load(project.pk)
    assert heap_fetches() == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memories_memoryterm'")
        assert "autovacuum_vacuum_insert_scale_factor=0.01" in cursor.fetchone()[0]

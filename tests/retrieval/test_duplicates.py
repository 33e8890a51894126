"""The near-duplicate lookup: the nearest live memory a user sees, as an exact scan finds it."""

from __future__ import annotations

import pytest

from memories.models import Memory
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.vector_cache import embed_texts
from retrieval.vectors import duplicates
from retrieval.vectors.duplicates import _nearest_by_scan, nearest_memory
from tests.support.search import stored

pytestmark = pytest.mark.django_db

MODEL = "all-MiniLM-L6-v2"


def vector(text: str):
    return embed_texts([text], embedder=embedder_for_model(MODEL))[0]


def test_the_nearest_live_memory_is_the_one_an_exact_scan_finds(project, other_project):
    activities = ["deploys", "cooks", "reads about", "plays", "repairs", "paints"]
    things = ["Kubernetes", "pasta", "the violin", "old bicycles", "Rust", "a garden", "chess", "jazz"]
    stored(project, "alice", [f"Alice {a} {t} on day {n}." for a in activities for t in things for n in range(6)])
    stored(project, "bob", [f"Bob shares that the team {a} {t}." for a in activities for t in things], scope="project")
    stored(project, "bob", ["Alice plays the violin on Sundays."])  # Bob's own: not Alice's to see
    stored(other_project, "alice", ["Alice plays the violin on Sundays."])  # another project's
    questions = ["Alice plays the violin on Sundays.", "The team cooks pasta.", "Who repairs bicycles?", "Rust"]
    for question in questions:
        query = vector(question)
        found = nearest_memory(project=project, user_id="alice", model=MODEL, vector=query)
        exact = _nearest_by_scan(project=project, user_id="alice", model=MODEL, vector=query)
        assert found is not None and exact is not None
        assert found.memory_id == exact.memory_id and found.similarity == pytest.approx(exact.similarity, abs=1e-6)
        seen = Memory.objects.get(pk=found.memory_id)
        assert seen.project_id == project.pk and (seen.user_id == "alice" or seen.scope == "project")


def test_a_closer_memory_that_is_not_live_is_passed_over_even_when_it_is_all_the_copies_picked(project, monkeypatch):
    superseded, live = stored(
        project, "alice", ["Alice deploys with Kubernetes.", "Alice ships containers to a cluster."]
    )
    Memory.objects.filter(pk=superseded.pk).update(status="superseded")
    query = vector("Alice deploys with Kubernetes.")
    found = nearest_memory(project=project, user_id="alice", model=MODEL, vector=query)
    assert found is not None and found.memory_id == str(live.pk) and found.similarity < 0.99
    monkeypatch.setattr(duplicates, "NEAREST_PICK", 1)  # only the superseded one is picked: the scan answers
    assert nearest_memory(project=project, user_id="alice", model=MODEL, vector=query) == found
    Memory.objects.filter(pk=live.pk).update(status="superseded")
    assert nearest_memory(project=project, user_id="alice", model=MODEL, vector=query) is None


def test_a_review_pages_similar_memories_are_those_an_exact_scan_finds_never_a_walk(project):
    from django.db import connection, transaction

    from memories.fields import vector_literal
    from retrieval.vectors.duplicates import NEAREST_SQL, similar_memories
    from retrieval.vectors.vector_index import index_sql

    topics = ["deploys", "cooks", "reads about", "plays", "repairs"]
    stored(
        project,
        "alice",
        [f"Alice {t} {thing} on day {n}." for t in topics for thing in ("jazz", "Rust") for n in range(8)],
    )
    stored(project, "bob", [f"The team {t} jazz." for t in topics], scope="project")
    stored(project, "bob", ["Bob plays jazz on Fridays."])
    expired = stored(project, "alice", ["Alice plays jazz on Fridays."])[0]
    Memory.objects.filter(pk=expired.pk).update(expires_at="2000-01-01T00:00:00Z")
    with connection.cursor() as cursor:  # the graph a walked group gets: the statement must not walk it
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no index is built beside pending trigger events
        cursor.execute(*index_sql(MODEL, 384, concurrently=False))
    texts = ["Alice plays jazz on Fridays.", "The team cooks Rust.", "Alice repairs jazz records."]
    found = similar_memories(project=project, queries=[("alice", text) for text in texts], limit=3)
    for text, similar in zip(texts, found, strict=True):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e.memory_id::text FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id"
                " WHERE e.project_id = %s AND (e.user_id = 'alice' OR e.scope = 'project') AND m.status = 'active'"
                " AND (m.expires_at IS NULL OR m.expires_at > now())"
                " AND 1 - (e.vector::vector(384) <=> %s::vector(384)) >= 0.5"
                " ORDER BY (e.vector::vector(384) <=> %s::vector(384)) + 0 LIMIT 3",
                [project.pk, vector_literal(vector(text)), vector_literal(vector(text))],
            )
            exact = [row[0] for row in cursor.fetchall()]
        assert [str(s.memory.pk) for s in similar] == exact and exact
        assert str(expired.pk) not in exact
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")  # the planner's only way out of a sort: an index's order
        cursor.execute(
            "EXPLAIN " + NEAREST_SQL.format(dim=384),
            {"owners": ["alice"], "vectors": [vector_literal(vector(texts[0]))], "model": MODEL,
             "project": project.pk, "statuses": ["active"], "unexpired": True, "limit": 3, "pick": 20, "floor": 0.5},
        )  # fmt: skip
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Which of the owner's indexes reads the rows is the planner's choice from statistics and the
    # visibility map (it changes with autovacuum's timing); what must hold is that no graph is walked.
    assert "embedding_hnsw" not in plan, plan

"""Vectors are written with nine significant digits, or in binary: what Postgres stores is the float32 we sent."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import DatabaseError, connection, transaction
from pgvector import Vector

from memories import services
from memories.fields import binary_vectors, vector_literal, vectors_from_binary
from memories.models import Embedding
from retrieval.vectors.memory_vectors import store_vectors


def _unit_vectors(rows: int, dimension: int = 384) -> np.ndarray:
    vectors = np.random.default_rng(7).standard_normal((rows, dimension)).astype(np.float32)
    vectors[0, :4] = [1e-38, -3.4e38, 0.0, 1.0000001]  # the edges of float32
    return vectors


def _memory(project, user_id: str = "alice", content: str = "Alice keeps bees.", scope: str = "user"):
    return services.memory_create(
        project=project,
        draft=services.MemoryDraft(user_id=user_id, content=content, scope=scope),
        actor="test",
        embed_inline=False,
    )


def test_the_text_gives_back_every_float32_exactly():
    for vector in _unit_vectors(200):
        text = vector_literal(vector)
        parsed = np.array([float(part) for part in text[1:-1].split(",")], dtype=np.float32)
        np.testing.assert_array_equal(parsed, vector)
        assert len(text) < len(Vector(vector).to_text())
    assert vector_literal([0.5, 1.0]) == vector_literal(Vector([0.5, 1.0])) == "[0.5,1]"
    with pytest.raises(ValueError):
        vector_literal(np.zeros((2, 2)))


def test_vectors_in_binary_form_read_back_bit_for_bit(project):
    vectors = _unit_vectors(5)
    assert np.array_equal(vectors_from_binary(b"".join(binary_vectors(vectors)), 5), vectors)
    # As Postgres sends a group of them (retrieval.vectors.resident_vectors): its own binary form, back to back.
    memories = [_memory(project, content=f"Alice keeps {n} hives.") for n in range(5)]
    store_vectors(memories, vectors, model="test-model")
    order = [str(m.pk) for m in memories]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT string_agg(vector_send(vector), ''::bytea ORDER BY array_position(%s::text[], memory_id::text))"
            " FROM memories_embedding WHERE model = 'test-model'",
            [order],
        )
        assert np.array_equal(vectors_from_binary(bytes(cursor.fetchone()[0]), 5), vectors)
    with pytest.raises(ValueError):
        vectors_from_binary(b"\x00" * 10, 3)


def test_postgres_stores_the_vector_bit_for_bit(project):
    memory = _memory(project)
    vectors = _unit_vectors(3)
    for index, vector in enumerate(vectors):
        Embedding.objects.update_or_create(
            memory=memory,
            model=f"test-{index}",
            defaults={"project_id": project.pk, "user_id": "alice", "dimension": 384, "vector": vector},
        )
    for index, vector in enumerate(vectors):
        stored = Embedding.objects.get(memory=memory, model=f"test-{index}").vector
        np.testing.assert_array_equal(np.asarray(stored, dtype=np.float32), vector)


def test_the_binary_upsert_stores_each_vector_bit_for_bit_and_replaces_on_a_second_store(project, other_project):
    """``store_vectors`` sends vectors in pgvector's binary form: what Postgres stores is the float32
    we sent, on insert and on the conflict path, with the memory's owner and content hash."""
    memories = [
        _memory(owner, user, f"{user} keeps bees, hive {n}.", scope)
        for n, (owner, user, scope) in enumerate(
            [(project, "alice", "user"), (project, "bob", "project"), (other_project, "carol", "user")]
        )
    ]
    first, second = _unit_vectors(3), _unit_vectors(3)[::-1].copy()
    store_vectors(memories, first, model="test-binary")
    memories[0].content_hash = "changed"
    store_vectors(memories[:1], second[:1], model="test-binary")  # the conflict path replaces
    rows = {row.memory_id: row for row in Embedding.objects.filter(model="test-binary")}
    assert len(rows) == 3
    for memory, vector in zip(memories, [second[0], first[1], first[2]], strict=True):
        row = rows[memory.pk]
        np.testing.assert_array_equal(np.asarray(row.vector, dtype=np.float32), vector)
        assert (row.project_id, row.user_id, row.scope, row.dimension) == (
            memory.project_id,
            memory.user_id,
            memory.scope,
            384,
        )
        assert row.content_hash == memory.content_hash
    with pytest.raises(ValueError):
        store_vectors(memories, first[:2], model="test-binary")


def test_a_failed_binary_upsert_raises_djangos_database_error_and_stores_nothing(project):
    memory = _memory(project)
    memory.scope = "x" * 20  # longer than the column holds
    with pytest.raises(DatabaseError), transaction.atomic():
        store_vectors([memory], _unit_vectors(1), model="test-binary")
    assert not Embedding.objects.filter(model="test-binary").exists()

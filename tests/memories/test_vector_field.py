"""Vectors are written with nine significant digits: what Postgres stores is the float32 we sent."""

from __future__ import annotations

import numpy as np
import pytest
from pgvector import Vector

from memories import services
from memories.fields import vector_literal
from memories.models import Embedding


def _unit_vectors(rows: int, dimension: int = 384) -> np.ndarray:
    vectors = np.random.default_rng(7).standard_normal((rows, dimension)).astype(np.float32)
    vectors[0, :4] = [1e-38, -3.4e38, 0.0, 1.0000001]  # the edges of float32
    return vectors


def test_the_text_gives_back_every_float32_exactly():
    for vector in _unit_vectors(200):
        text = vector_literal(vector)
        parsed = np.array([float(part) for part in text[1:-1].split(",")], dtype=np.float32)
        np.testing.assert_array_equal(parsed, vector)
        assert len(text) < len(Vector(vector).to_text())
    assert vector_literal([0.5, 1.0]) == vector_literal(Vector([0.5, 1.0])) == "[0.5,1]"
    with pytest.raises(ValueError):
        vector_literal(np.zeros((2, 2)))


def test_postgres_stores_the_vector_bit_for_bit(project):
    memory = services.memory_create(
        project=project,
        draft=services.MemoryDraft(user_id="alice", content="Alice keeps bees."),
        actor="test",
        embed_inline=False,
    )
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

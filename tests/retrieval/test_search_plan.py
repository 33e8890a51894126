"""The hybrid statement is one query whose predicates the indexes serve."""

from __future__ import annotations

import numpy as np
from django.db import connection, transaction
from pgvector import Vector

from retrieval.search import BOILERPLATE_LEXEMES, HYBRID_SQL


def explain(project_id: int) -> str:
    params = {
        "project": project_id,
        "user": "alice",
        "query": "deploy kubernetes",
        "model": "all-MiniLM-L6-v2",
        "vectors": [Vector(np.ones(384, dtype=np.float32)).to_text()],
        "statuses": ["active"],
        "kinds": None,
        "categories": None,
        "depth": 50,
        "max_share": 0.1,
        "row_budget": 1000,
        "keyword_weight": 1.0,
        "vector_weight": 1.0,
        "hyde_weight": 1.0,
        "query_vectors": 1,
        "boilerplate": list(BOILERPLATE_LEXEMES),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        # Test tables are tiny, so the planner would rightly scan them; forbid that to see
        # whether the statement's predicates can use the indexes at all.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + HYBRID_SQL.format(dim=384), params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_explain_reads_memories_and_vectors_only_through_indexes(make_memory, api):
    make_memory(content="Alice deploys with Kubernetes.")
    plan = explain(api.project.pk)
    assert "Seq Scan on memories_memory" not in plan
    assert "Seq Scan on memories_embedding" not in plan
    assert "Seq Scan on retrieval_commonlexeme" not in plan
    assert plan.count("Index Scan") + plan.count("Bitmap Index Scan") >= 3

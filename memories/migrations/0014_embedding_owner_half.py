"""A half-precision copy of each vector, unit length, kept by Postgres (a stored generated column),
and the owner index holding it instead of the full vector: the search's exact read of a user's own
vectors scans half the bytes (docs/adr/0025: a user's 10,000 vectors ~12.3 -> ~7.6 ms on the
AMD machine; the top 60 it picks, re-ranked by the full vectors, were the exact top 60 in the same
order for 200 of 200 questions).

Rows of 384 dimensions grow from ~1.6 kB to ~2.35 kB, past the 2 kB at which Postgres moves a
row's largest value out of line: ``toast_tuple_target`` keeps the full vector in the row, where the
search reads it for the ~80 rows it re-ranks and the ~80 candidates' cosines (toasted, each read
cost an extra lookup: the fusion statement ~1 ms slower on 100k memories). Set first, so the rewrite
that adds the column writes the rows so.

Adding the column rewrites ``memories_embedding`` once and rebuilds its indexes, the HNSW one
included, under a lock that blocks reads and writes of it: searches and new vectors wait. 100k
vectors: 49 s for the whole migration on the 2-core AMD machine, nearly all of it this rewrite.
The new index is then built concurrently beside the old one, which it replaces.
"""

import pgvector.django.halfvec
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.models.functions import Cast


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0013_embedding_owner_vectors"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_embedding SET (toast_tuple_target = 8160)",
            "ALTER TABLE memories_embedding RESET (toast_tuple_target)",
        ),
        migrations.AddField(
            model_name="embedding",
            name="vector_half",
            field=models.GeneratedField(
                db_persist=True,
                expression=Cast(
                    models.Func(models.F("vector"), function="l2_normalize"), pgvector.django.halfvec.HalfVectorField()
                ),
                output_field=pgvector.django.halfvec.HalfVectorField(),
            ),
        ),
        AddIndexConcurrently(
            model_name="embedding",
            index=models.Index(
                fields=["model", "project", "user_id"], include=["memory", "vector_half"], name="embedding_owner_half"
            ),
        ),
        RemoveIndexConcurrently(model_name="embedding", name="embedding_owner_vectors"),
    ]

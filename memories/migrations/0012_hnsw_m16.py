"""Rebuild the default model's HNSW index with m 16 / ef_construction 128 (was m 24, since 0005).

Each insert into an HNSW graph with m 24 updated up to 48 neighbour lists, pruning each by
distance: storing a vector cost ~1.7 ms of Postgres CPU, the longest step of a bulk load. With
m 16 a LoCoMo observations load ran 470 -> 570 memories/s. Recall held: at 100k memories over 10
users, inserted row by row as ``bench_retrieve`` seeds them, the filtered top 10 matched an exact
search in 400 of 400 queries (m 16 with ef_construction 64, pgvector's default, matched 394; it is
the construction depth, not m, that the duplicate-heavy bench corpus needs). Built CONCURRENTLY
beside the old index and swapped in, as 0005 did (``retrieval.vectors.vector_index.HNSW_BUILD``).
"""

import importlib

from django.db import migrations

# The same concurrent build-and-swap as 0005 (frozen, like every migration), with other parameters.
swap = importlib.import_module("memories.migrations.0005_hnsw_build_parameters").swap


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("memories", "0011_gin_pending_list")]

    operations = [
        migrations.RunSQL(swap("m = 16, ef_construction = 128"), swap("m = 24, ef_construction = 128")),
    ]

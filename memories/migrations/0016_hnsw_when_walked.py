"""Drop the default model's HNSW index while no group of its vectors is large enough to be walked.

The search walks a group's graph only above ``retrieval.ranking.search.VECTOR_EXACT_MAX_ROWS`` vectors (a
user's own, or a project's shared ones); a smaller group is read exactly. Kept for every group, the
index cost each stored vector an insert into the graph: loading the 5,882 LoCoMo turns took the
machine 47.8 s of CPU with it and 24.6 s without (227-246 -> 431 memories/s; docs/adr/0027).
From now on the sweeper queues a model's index build when its first group passes the
size (``retrieval.vectors.vector_index.queue_needed_indexes``); a database that already has such a group
keeps it.
The size is frozen here, as a migration must be.
"""

import importlib

from django.db import migrations

# 0005's frozen names and build statement, as 0012 uses them.
_0005 = importlib.import_module("memories.migrations.0005_hnsw_build_parameters")
INDEX = _0005.INDEX
MODEL = "all-MiniLM-L6-v2"
EXACT_MAX_ROWS = 20_000  # retrieval.ranking.search.VECTOR_EXACT_MAX_ROWS when this was written

WALKED_GROUP = """
SELECT EXISTS (SELECT FROM memories_embedding WHERE model = %(model)s
               GROUP BY project_id, user_id HAVING count(*) > %(rows)s)
    OR EXISTS (SELECT FROM memories_embedding WHERE model = %(model)s AND scope = 'project'
               GROUP BY project_id HAVING count(*) > %(rows)s)
"""


def drop_unless_walked(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(WALKED_GROUP, {"model": MODEL, "rows": EXACT_MAX_ROWS})
        (walked,) = cursor.fetchone()
        if not walked:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")


def build(apps, schema_editor):
    """Back: the index as 0012 left it, built concurrently as 0005 and 0012 build it."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_0005.CREATE.format(name=INDEX, params="m = 16, ef_construction = 128"))


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY, as 0005 and 0012: writers are not blocked
    dependencies = [("memories", "0015_vector_groups")]

    operations = [migrations.RunPython(drop_unless_walked, build)]

"""Row-level security on the memories app's tables (``common.row_security``).

Creates the ``memoryhub_tenant`` role (no login) and one policy per content table: a row is
visible to that role only when its project is the request's. Skipped, with a warning, when
the migrating user may not create roles.
"""

from django.db import migrations

from common import row_security as rs

PROJECT_TABLES = [
    "memories_memory",
    "memories_memoryedge",
    "memories_embedding",
    "memories_conversation",
    "memories_scratchpadentry",
]
CHILD_TABLES = [
    ("memories_memoryrevision", "memory_id", "memories_memory"),
    ("memories_message", "conversation_id", "memories_conversation"),
]


def forward(apps, schema_editor):
    statements = rs.role_sql()
    for table in PROJECT_TABLES:
        statements += rs.project_policy_sql(table)
    for table, column, parent in CHILD_TABLES:
        statements += rs.parent_policy_sql(table, column, parent)
    rs.apply(schema_editor, statements)


def backward(apps, schema_editor):
    statements = []
    for table in [*PROJECT_TABLES, *(t for t, _, _ in CHILD_TABLES)]:
        statements += rs.drop_policy_sql(table)
    rs.apply(schema_editor, statements)


class Migration(migrations.Migration):
    dependencies = [("memories", "0005_hnsw_build_parameters")]

    operations = [migrations.RunPython(forward, backward)]

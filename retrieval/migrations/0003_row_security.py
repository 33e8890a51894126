"""Row-level security on retrieval logs and keyword statistics (``common.row_security``)."""

from django.db import migrations

from common import row_security as rs

TABLES = ["retrieval_retrievallog", "retrieval_keywordstats"]
CHILD = ("retrieval_commonlexeme", "stats_id", "retrieval_keywordstats")


def forward(apps, schema_editor):
    statements = []
    for table in TABLES:
        statements += rs.project_policy_sql(table)
    statements += rs.parent_policy_sql(*CHILD)
    rs.apply(schema_editor, statements)


def backward(apps, schema_editor):
    statements = []
    for table in [*TABLES, CHILD[0]]:
        statements += rs.drop_policy_sql(table)
    rs.apply(schema_editor, statements)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_keyword_stats"), ("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, backward)]

"""Row-level security on consolidation's tables (``memoryhub.row_security``)."""

from django.db import migrations

from common import row_security as rs

TABLES = ("consolidation_consolidationrun", "consolidation_consolidationstate", "consolidation_consolidationaction")


def forward(apps, schema_editor):
    rs.apply(schema_editor, [statement for table in TABLES for statement in rs.project_policy_sql(table)])


def backward(apps, schema_editor):
    rs.apply(schema_editor, [statement for table in TABLES for statement in rs.drop_policy_sql(table)])


class Migration(migrations.Migration):
    dependencies = [("consolidation", "0001_initial"), ("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, backward)]

"""Row-level security on import records (``common.row_security``)."""

from django.db import migrations

from common import row_security as rs


def forward(apps, schema_editor):
    rs.apply(schema_editor, rs.project_policy_sql("integrations_importedrecord"))


def backward(apps, schema_editor):
    rs.apply(schema_editor, rs.drop_policy_sql("integrations_importedrecord"))


class Migration(migrations.Migration):
    dependencies = [("integrations", "0001_initial"), ("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, backward)]

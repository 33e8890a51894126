"""Row-level security on capture jobs (``common.row_security``)."""

from django.db import migrations

from common import row_security as rs


def forward(apps, schema_editor):
    rs.apply(schema_editor, rs.project_policy_sql("capture_capturejob"))


def backward(apps, schema_editor):
    rs.apply(schema_editor, rs.drop_policy_sql("capture_capturejob"))


class Migration(migrations.Migration):
    dependencies = [("capture", "0001_initial"), ("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, backward)]

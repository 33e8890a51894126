"""Row-level security on profiles and their versions (``common.row_security``)."""

from django.db import migrations

from common import row_security as rs


def forward(apps, schema_editor):
    rs.apply(schema_editor, rs.project_policy_sql("profiles_profile"))
    rs.apply(schema_editor, rs.parent_policy_sql("profiles_profileversion", "profile_id", "profiles_profile"))


def backward(apps, schema_editor):
    rs.apply(schema_editor, rs.drop_policy_sql("profiles_profileversion"))
    rs.apply(schema_editor, rs.drop_policy_sql("profiles_profile"))


class Migration(migrations.Migration):
    dependencies = [("profiles", "0001_initial"), ("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, backward)]

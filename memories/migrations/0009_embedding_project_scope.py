# Built concurrently: on a large embedding table a plain CREATE INDEX would block writes.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0008_project_min_score"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="embedding",
            index=models.Index(
                condition=models.Q(("scope", "project")), fields=["model", "project"], name="embedding_project_scope"
            ),
        ),
    ]

"""Full-text index keyed by (project, user): keyword search reads only the caller's rows.

With a GIN index on ``search`` alone, an OR query's bitmap holds every matching row of the
whole project before the per-user filter applies; ``bench_retrieve`` (100k memories over 10
users) measured that scan at 9-15 ms of a ~30 ms keyword stage, and about 4 ms with this one.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import BtreeGinExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0003_default_model_vector_index")]

    operations = [
        BtreeGinExtension(),
        migrations.RemoveIndex(model_name="memory", name="memory_search_gin"),
        migrations.AddIndex(
            model_name="memory",
            index=GinIndex(fields=["project", "user_id", "search"], name="memory_user_search_gin"),
        ),
    ]

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models


# Messages stored before this migration get the message before them as their context.
BACKFILL_CONTEXT = """
UPDATE memories_message m SET context = left(p.previous, 300)
FROM (SELECT id, lag(content) OVER (PARTITION BY conversation_id ORDER BY seq) AS previous
      FROM memories_message) p
WHERE p.id = m.id AND p.previous IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0018_memoryterm_autovacuum"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="context",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="message",
            name="said_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="search",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.CombinedSearchVector(
                    django.contrib.postgres.search.SearchVector("content", config="english", weight="A"),
                    "||",
                    django.contrib.postgres.search.SearchVector("context", config="english", weight="B"),
                    django.contrib.postgres.search.SearchConfig("english"),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search"], name="message_search"),
        ),
        migrations.RunSQL(BACKFILL_CONTEXT, migrations.RunSQL.noop),
    ]

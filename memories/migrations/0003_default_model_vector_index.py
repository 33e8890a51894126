"""The HNSW index of the default local model, so a fresh install searches fast at once.

Other models get theirs from the re-embed job or the sweeper (retrieval.vectors.vector_index)."""

from django.db import migrations

INDEX = "embedding_hnsw_local_minilm"


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_embedding_content_hash")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON memories_embedding "
            "USING hnsw ((vector::vector(384)) vector_cosine_ops) WHERE model = 'all-MiniLM-L6-v2'",
            f"DROP INDEX IF EXISTS {INDEX}",
        )
    ]

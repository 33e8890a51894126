"""Vacuum ``memories_memoryterm`` soon after writes.

Full text reads a memory's words by index-only scans (``retrieval.ranking.search.KEYWORD_SQL``), which visit
the table for every row on a page not yet marked all-visible: a page is marked when vacuumed.
Postgres's defaults wait until 20 % of a table is new (at 100k memories ~185,000 rows, ~18,000
memories); this table is vacuumed after 1 % is new and after 5 % is rewritten or removed, and
analysed after 5 % changed. A vacuum of pages only inserted into is cheap.
"""

from django.db import migrations

SETTINGS = (
    "autovacuum_vacuum_insert_scale_factor = 0.01",
    "autovacuum_vacuum_scale_factor = 0.05",
    "autovacuum_analyze_scale_factor = 0.05",
)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0017_memory_terms"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE memories_memoryterm SET ({', '.join(SETTINGS)})",
            "ALTER TABLE memories_memoryterm RESET ("
            + ", ".join(setting.split(" =")[0] for setting in SETTINGS)
            + ")",
        ),
    ]

"""The full-text search's words, one row per memory and word (``memories.models.MemoryTerm``), kept by
Postgres.

Triggers on ``memories_memory``: after an insert statement, its memories' words (from the transition
table); after an update of a row whose content or whose visibility (project, user, scope, status,
kind, category, expiry) changed, that memory's words again; after a delete statement, its memories'
words go; a truncate empties the table. All in the writing transaction, so a search sees a memory's
words exactly when it sees the memory.

``memories_term_weight(n)`` is a word's term in ``ts_rank`` (default weights, no normalisation) when
it has ``n`` positions, all of weight D as ``to_tsvector`` gives them: tsrank.c's ``calc_rank_or``
for one word, its single-precision steps included (``ts_rank_weights`` below; the tests compare the
search's scores with ``ts_rank``'s). ``memories_rank_sum`` adds such terms as ``calc_rank_or`` does.
"""

import django.db.models.deletion
import numpy as np
from django.db import migrations, models

from common import row_security as rs

# tsvector keeps at most 256 positions of a word (MAXNUMPOS).
MAX_POSITIONS = 256


def ts_rank_weights(limit: int = MAX_POSITIONS) -> list[float]:
    """Each word's term in ``ts_rank``'s sum by its number of positions (1..limit), computed as tsrank.c
    computes it: in single precision, ``(wjm + resj - wjm / (jm + 1)^2) / 1.64493406685`` with
    ``resj`` the sum of ``w / (j + 1)^2`` over the positions; every position's weight is D's, 0.1,
    so the largest is the first (``jm`` 0)."""
    weight = np.float32(0.1)
    resj = np.float32(0.0)
    terms = []
    for j in range(limit):
        resj = np.float32(resj + weight / np.float32((j + 1) * (j + 1)))
        term = np.float32(np.float32(weight + resj) - weight)
        terms.append(float(np.float64(term) / 1.64493406685))
    return terms


WEIGHT_FUNCTION = f"""
CREATE FUNCTION memories_term_weight(positions integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ('{{{",".join(repr(w) for w in ts_rank_weights())}}}'::float8[])[least(greatest(positions, 1), {MAX_POSITIONS})] $$
"""

# A memory's words, from rows "m" with the memory table's columns.
WORDS = """
INSERT INTO memories_memoryterm (memory_id, lexeme, project_id, user_id, scope, status, kind, category, expires_at, weight)
SELECT m.id, w.lexeme, m.project_id, m.user_id, m.scope, m.status, m.kind, m.category, m.expires_at,
       memories_term_weight(coalesce(array_length(w.positions, 1), 1))
FROM {rows} m, unnest(m.search) w
"""

# ts_rank's sum of its words' terms, step by step as tsrank.c adds them (``res = res + term``, ``res``
# single precision): for a memory with more words than the search adds inline (retrieval.ranking.search).
RANK_SUM = [
    """
CREATE FUNCTION memories_rank_step(total real, term double precision) RETURNS real
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT (total::float8 + term)::real $$""",
    "CREATE AGGREGATE memories_rank_sum(double precision) (sfunc = memories_rank_step, stype = real, initcond = '0')",
]

FUNCTIONS = [
    WEIGHT_FUNCTION,
    *RANK_SUM,
    f"""
CREATE FUNCTION memories_memory_terms_inserted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    {WORDS.format(rows="new_rows")};
    RETURN NULL;
END
$body$""",
    f"""
CREATE FUNCTION memories_memory_terms_updated() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    DELETE FROM memories_memoryterm WHERE memory_id = OLD.id;
    {WORDS.format(rows="(SELECT NEW.*)")};
    RETURN NULL;
END
$body$""",
    """
CREATE FUNCTION memories_memory_terms_deleted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM memories_memoryterm;
    ELSE
        DELETE FROM memories_memoryterm t USING old_rows o WHERE t.memory_id = o.id;
    END IF;
    RETURN NULL;
END
$body$""",
]

# The columns a memory's words copy: a change to any of them writes the words again.
COPIED = ("content", "project_id", "user_id", "scope", "status", "kind", "category", "expires_at")

TRIGGERS = [
    "CREATE TRIGGER memory_terms_inserted AFTER INSERT ON memories_memory "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_memory_terms_inserted()",
    "CREATE TRIGGER memory_terms_updated AFTER UPDATE ON memories_memory FOR EACH ROW WHEN ("
    + " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in COPIED)
    + ") EXECUTE FUNCTION memories_memory_terms_updated()",
    "CREATE TRIGGER memory_terms_deleted AFTER DELETE ON memories_memory "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_memory_terms_deleted()",
    "CREATE TRIGGER memory_terms_truncated AFTER TRUNCATE ON memories_memory "
    "FOR EACH STATEMENT EXECUTE FUNCTION memories_memory_terms_deleted()",
]

# The words of the memories already stored (the triggers are in place first).
BACKFILL = WORDS.format(rows="memories_memory")

DROP = [
    *(
        f"DROP TRIGGER IF EXISTS {name} ON memories_memory"
        for name in ("memory_terms_inserted", "memory_terms_updated", "memory_terms_deleted", "memory_terms_truncated")
    ),
    "DROP FUNCTION IF EXISTS memories_memory_terms_inserted()",
    "DROP FUNCTION IF EXISTS memories_memory_terms_updated()",
    "DROP FUNCTION IF EXISTS memories_memory_terms_deleted()",
    "DROP FUNCTION IF EXISTS memories_term_weight(integer)",
    "DROP AGGREGATE IF EXISTS memories_rank_sum(double precision)",
    "DROP FUNCTION IF EXISTS memories_rank_step(real, double precision)",
]


def policy(apps, schema_editor):
    rs.apply(schema_editor, rs.project_policy_sql("memories_memoryterm"))


def drop_policy(apps, schema_editor):
    rs.apply(schema_editor, rs.drop_policy_sql("memories_memoryterm"))


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0016_hnsw_when_walked"),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryTerm",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "memory_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("lexeme", models.TextField()),
                ("user_id", models.CharField(max_length=255)),
                ("scope", models.CharField(choices=[("user", "User"), ("project", "Project")], max_length=10)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("active", "Active"),
                            ("pending_review", "Pending Review"),
                            ("superseded", "Superseded"),
                            ("archived", "Archived"),
                            ("deleted", "Deleted"),
                        ],
                        max_length=20,
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("fact", "Fact"),
                            ("preference", "Preference"),
                            ("decision", "Decision"),
                            ("note", "Note"),
                        ],
                        max_length=20,
                    ),
                ),
                ("category", models.CharField(blank=True, max_length=100)),
                ("expires_at", models.DateTimeField(null=True)),
                ("weight", models.FloatField()),
                (
                    "memory",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memories.memory",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memories.project",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["project", "user_id", "lexeme"],
                        include=("memory", "weight", "scope", "status", "expires_at", "kind", "category"),
                        name="memoryterm_user_lexeme",
                    ),
                    models.Index(
                        condition=models.Q(("scope", "project")),
                        fields=["project", "lexeme"],
                        include=("memory", "user_id", "weight", "status", "expires_at", "kind", "category"),
                        name="memoryterm_shared_lexeme",
                    ),
                ],
            },
        ),
        migrations.RunSQL([*FUNCTIONS, *TRIGGERS, BACKFILL], DROP),
        migrations.RunPython(policy, drop_policy),
    ]

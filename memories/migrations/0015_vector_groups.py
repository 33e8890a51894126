"""Each group of vectors a search reads as one (a user's own, a project's shared ones, per model) gets
a generation that Postgres changes whenever a row of the group does, and the ids of the memories
changed lately (``memories.models.VectorGroup``).

Statement-level triggers on ``memories_embedding`` (insert, update, delete; each with its transition
table) give every group the statement touched a new value from one sequence, drawn while holding
the group's row, and add the statement's memory ids to the group's recent ones; a truncate gives
every group a new value and forgets the recent ids. The row is written in the writing transaction:
a reader sees the new generation exactly when it sees the new vectors. A sequence, not a counter,
so a value never comes back, even after the table is emptied (the tests' flush).

Writers of the same group now wait for each other's commit at the group's row (a capture and an
import of one user, say); each statement locks its groups in one order. A write statement pays for
one small upsert per group (``retrieval.vectors.resident_vectors`` reads them; docs/adr/0026).
"""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

from common import row_security as rs

SEQUENCE = "memories_vectorgroup_generation"

RECENT_IDS = 64  # memories.models.VectorGroup.RECENT_IDS

FUNCTION = f"""
CREATE FUNCTION memories_embedding_groups_changed() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    -- The statement's rows, as its transition tables name them (trigger definitions below).
    changed text := CASE TG_OP
        WHEN 'INSERT' THEN 'new_rows'
        WHEN 'DELETE' THEN 'old_rows'
        ELSE '(SELECT memory_id, project_id, model, user_id, scope FROM new_rows'
             ' UNION ALL SELECT memory_id, project_id, model, user_id, scope FROM old_rows)'
    END;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE memories_vectorgroup SET generation = nextval('{SEQUENCE}'), recent_since = NULL, recent_ids = '{{}}';
        RETURN NULL;
    END IF;
    -- A row belongs to its user's group, and a project-scope row to the shared group ('') too. Groups
    -- are locked in one order. An existing group's generation is drawn after its row is locked
    -- (DO UPDATE), so it is above every value a write committed before; its recent ids grow by the
    -- statement's, or restart with them from the old generation, or are unknown (NULL) when too many.
    EXECUTE format($sql$
        INSERT INTO memories_vectorgroup AS g (project_id, model, owner, generation, recent_since, recent_ids)
        SELECT project_id, model, owner, nextval('{SEQUENCE}'), NULL, ids
        FROM (SELECT r.project_id, r.model, o.owner, array_agg(DISTINCT r.memory_id) AS ids
              FROM %s r, LATERAL (VALUES (r.user_id), (CASE WHEN r.scope = 'project' THEN '' END)) o(owner)
              WHERE o.owner IS NOT NULL
              GROUP BY 1, 2, 3
              ORDER BY 1, 2, 3) groups
        ON CONFLICT (project_id, model, owner) DO UPDATE SET
            generation = nextval('{SEQUENCE}'),
            recent_since = CASE
                WHEN g.recent_since IS NOT NULL
                     AND cardinality(g.recent_ids) + cardinality(excluded.recent_ids) <= {RECENT_IDS}
                    THEN g.recent_since
                WHEN cardinality(excluded.recent_ids) <= {RECENT_IDS} THEN g.generation
            END,
            recent_ids = CASE
                WHEN g.recent_since IS NOT NULL
                     AND cardinality(g.recent_ids) + cardinality(excluded.recent_ids) <= {RECENT_IDS}
                    THEN g.recent_ids || excluded.recent_ids
                WHEN cardinality(excluded.recent_ids) <= {RECENT_IDS} THEN excluded.recent_ids
                ELSE '{{}}'
            END
    $sql$, changed);
    RETURN NULL;
END
$body$
"""

TRIGGERS = [
    "CREATE TRIGGER embedding_groups_inserted AFTER INSERT ON memories_embedding "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_groups_changed()",
    "CREATE TRIGGER embedding_groups_updated AFTER UPDATE ON memories_embedding "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_groups_changed()",
    "CREATE TRIGGER embedding_groups_deleted AFTER DELETE ON memories_embedding "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_groups_changed()",
    "CREATE TRIGGER embedding_groups_truncated AFTER TRUNCATE ON memories_embedding "
    "FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_groups_changed()",
]

# The groups of the vectors already stored (the triggers are in place first: they lock the table
# against writes until this migration commits).
BACKFILL = f"""
INSERT INTO memories_vectorgroup (project_id, model, owner, generation, recent_ids)
SELECT project_id, model, owner, nextval('{SEQUENCE}'), '{{}}'
FROM (SELECT project_id, model, user_id AS owner FROM memories_embedding
      UNION SELECT project_id, model, '' FROM memories_embedding WHERE scope = 'project') groups
"""

DROP = [
    *(
        f"DROP TRIGGER IF EXISTS {name} ON memories_embedding"
        for name in (
            "embedding_groups_inserted",
            "embedding_groups_updated",
            "embedding_groups_deleted",
            "embedding_groups_truncated",
        )
    ),
    "DROP FUNCTION IF EXISTS memories_embedding_groups_changed()",
    f"DROP SEQUENCE IF EXISTS {SEQUENCE}",
]


def policy(apps, schema_editor):
    rs.apply(schema_editor, rs.project_policy_sql("memories_vectorgroup"))


def drop_policy(apps, schema_editor):
    rs.apply(schema_editor, rs.drop_policy_sql("memories_vectorgroup"))


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0014_embedding_owner_half"),
    ]

    operations = [
        migrations.CreateModel(
            name="VectorGroup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("model", models.CharField(max_length=100)),
                ("owner", models.CharField(blank=True, max_length=255)),
                ("generation", models.BigIntegerField()),
                ("recent_since", models.BigIntegerField(null=True)),
                (
                    "recent_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.UUIDField(), default=list, size=None
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.project"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("project", "model", "owner"), name="vectorgroup_project_model_owner"
                    )
                ],
            },
        ),
        migrations.RunSQL([f"CREATE SEQUENCE {SEQUENCE}", FUNCTION, *TRIGGERS, BACKFILL], DROP),
        migrations.RunPython(policy, drop_policy),
    ]

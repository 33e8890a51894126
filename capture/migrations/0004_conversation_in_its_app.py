"""A capture job's conversation is now ``conversations.Conversation`` (the same table)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('capture', '0003_redact_stored_secrets'),
        ('conversations', '0001_initial'),
    ]

    operations = [
        # The tables stay as they are (same names); only Django's idea of which app owns them moves.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='capturejob',
                    name='conversation',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='capture_jobs', to='conversations.conversation'),
                ),
            ],
            database_operations=[],
        ),
    ]

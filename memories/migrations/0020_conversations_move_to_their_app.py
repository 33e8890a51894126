"""Conversation and Message now belong to ``conversations`` (the same tables)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('capture', '0004_conversation_in_its_app'),
        ('memories', '0019_message_episodes'),
        ('conversations', '0001_initial'),
    ]

    operations = [
        # The tables stay as they are (same names); only Django's idea of which app owns them moves.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='message',
                    name='conversation',
                ),
                migrations.DeleteModel(
                    name='Conversation',
                ),
                migrations.DeleteModel(
                    name='Message',
                ),
            ],
            database_operations=[],
        ),
    ]

"""Conversation and Message, moved here from ``memories``: their tables already exist."""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import memories.fields
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('memories', '0019_message_episodes'),
    ]

    operations = [
        # The tables stay as they are (same names); only Django's idea of which app owns them moves.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Conversation',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('user_id', models.CharField(max_length=255)),
                        ('session_id', models.CharField(blank=True, default='', max_length=255)),
                        ('title', models.CharField(blank=True, default='', max_length=255)),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversations', to='memories.project')),
                    ],
                    options={
                        'db_table': 'memories_conversation',
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('seq', models.PositiveIntegerField()),
                        ('role', models.CharField(max_length=20)),
                        ('content', models.TextField(blank=True, default='')),
                        ('extra', models.JSONField(blank=True, default=dict)),
                        ('correlation_id', models.CharField(blank=True, default='', max_length=100)),
                        ('embedding_model', models.CharField(blank=True, default='', max_length=100)),
                        ('embedding', memories.fields.FloatVectorField(blank=True, null=True)),
                        ('said_at', models.DateTimeField(blank=True, null=True)),
                        ('context', models.TextField(blank=True, default='')),
                        ('search', models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector('content', config='english', weight='A'), '||', django.contrib.postgres.search.SearchVector('context', config='english', weight='B'), django.contrib.postgres.search.SearchConfig('english')), output_field=django.contrib.postgres.search.SearchVectorField())),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='conversations.conversation')),
                    ],
                    options={
                        'db_table': 'memories_message',
                        'ordering': ['conversation', 'seq'],
                    },
                ),
                migrations.AddIndex(
                    model_name='conversation',
                    index=models.Index(fields=['project', 'user_id', 'session_id'], name='conversation_session'),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=django.contrib.postgres.indexes.GinIndex(fields=['search'], name='message_search'),
                ),
                migrations.AddConstraint(
                    model_name='message',
                    constraint=models.UniqueConstraint(fields=('conversation', 'seq'), name='message_unique_seq'),
                ),
            ],
            database_operations=[],
        ),
    ]

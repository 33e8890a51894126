"""Conversations and their messages: what agents sent, kept verbatim, searched as episodes.

The tables keep the names they had when these models lived in ``memories`` (``memories_conversation``,
``memories_message``): row security policies, triggers and raw SQL name them.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models

from memories.fields import FloatVectorField
from memories.models import Project


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="conversations")
    user_id = models.CharField(max_length=255)
    session_id = models.CharField(max_length=255, blank=True, default="")
    title = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "memories_conversation"
        indexes = [models.Index(fields=["project", "user_id", "session_id"], name="conversation_session")]

    def __str__(self) -> str:
        return f"{self.user_id}/{self.session_id or self.id}"


class Message(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=20)
    content = models.TextField(blank=True, default="")
    # Tool calls and other structured parts, kept verbatim for audit; never embedded.
    extra = models.JSONField(default=dict, blank=True)
    correlation_id = models.CharField(max_length=100, blank=True, default="")
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    embedding = FloatVectorField(null=True, blank=True)
    # A user message's sentences and clauses, each embedded alone with ``embedding_model``
    # (float32 rows back to back): in "help me budget? i freelance as a translator, so my income
    # swings" the whole message's vector is about budgets, and "what do i do for work" finds the
    # clause (``retrieval.vectors.message_vectors.passages``). b"": none; None: not embedded yet
    # (the sweeper embeds a user message's, also one embedded before messages had passages).
    passage_vectors = models.BinaryField(null=True, blank=True, editable=False)
    # When the message was said, as its sender dated it (``timestamp``); else when it arrived.
    said_at = models.DateTimeField(null=True, blank=True)
    # The message before it, as said (cut): "called the arch" answers "which gym do you go to?",
    # so an episode is searched with what it replies to.
    context = models.TextField(blank=True, default="")
    # Messages are searched as episodes beside memories (``retrieval.ranking.episodes``): their words too,
    # the context's weighing less.
    search = models.GeneratedField(
        expression=SearchVector("content", config="english", weight="A")
        + SearchVector("context", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "memories_message"
        ordering = ["conversation", "seq"]
        constraints = [models.UniqueConstraint(fields=["conversation", "seq"], name="message_unique_seq")]
        indexes = [GinIndex(fields=["search"], name="message_search")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"

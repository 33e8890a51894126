"""manage.py reembed switches a project to another model and shows progress."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from memories.models import Embedding, Project
from retrieval.embedding import embedders

pytestmark = pytest.mark.django_db(transaction=True)


def test_reembed_inline_switches_the_model_and_drops_old_vectors(settings, fake_openai, make_memory, api):
    for n in range(5):
        make_memory(content=f"Alice's note number {n}.")
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    embedders.reset_embedder_cache()
    out = io.StringIO()
    call_command("reembed", model="fake-embed", project="acme-agent", inline=True, stdout=out)
    assert Project.objects.get(slug="acme-agent").active_embedding_model == "fake-embed"
    assert sorted(Embedding.objects.values_list("model", "dimension").distinct()) == [("fake-embed", 64)]
    assert "5/5" in out.getvalue()
    embedders.reset_embedder_cache()


def test_after_a_switch_the_projects_messages_wait_to_be_embedded_with_the_new_model(api):
    from datetime import timedelta

    from django.utils import timezone

    from conversations.models import Conversation, Message
    from retrieval.embedding.reembed import switch_model
    from retrieval.vectors.message_vectors import embed_messages, messages_awaiting_embedding

    conversation = Conversation.objects.create(project=api.project, user_id="alice")
    said = Message.objects.create(conversation=conversation, seq=1, role="user", content="i work nights as a nurse")
    embed_messages(message_ids=[str(said.pk)])
    later = timezone.now() + timedelta(seconds=1)
    assert messages_awaiting_embedding(older_than=later, limit=10) == []
    switch_model(project_id=api.project.pk, model="fake-embed")
    said.refresh_from_db()
    assert (said.embedding_model, said.passage_vectors) == ("", None)
    assert messages_awaiting_embedding(older_than=later, limit=10) == [str(said.pk)]

"""The memory page: labelled source fields, named actors, the link picker's
search and links worded from the reader's side."""

from __future__ import annotations

from capture.models import CaptureJob
from conversations.models import Conversation
from memories import edges, lifecycle, services, tenancy


def _page(client, project, memory):
    return client.get(f"/p/{project.slug}/memories/{memory.pk}/").content.decode()


def test_the_source_is_shown_as_labelled_fields_linking_to_the_capture_job(client_as, memory_factory, project):
    conversation = Conversation.objects.create(project=project, user_id="alice", title="Editor chat", session_id="s-9")
    job = CaptureJob.objects.create(
        project=project, user_id="alice", conversation=conversation, trigger="turn", created_by="api_key:x"
    )
    source = {
        "capture_job": str(job.pk),
        "conversation": str(conversation.pk),
        "session_id": "s-9",
        "excerpt": "I use vim",
    }
    draft = services.MemoryDraft(user_id="alice", content="Alice uses vim.", source=source)
    memory = services.memory_create(project=project, draft=draft, actor=f"rules:{job.pk}", embed_inline=False)
    page = _page(client_as("viewer"), project, memory)
    assert "<dt>Capture job</dt>" in page and "<dt>Conversation</dt>" in page and "Editor chat" in page
    assert page.count(f'href="/p/{project.slug}/captures/{job.pk}/"') == 4  # creator twice, job, conversation
    assert f"capture job {str(job.pk)[:8]}… (rules)" in page
    assert "<q>I use vim</q>" in page


def test_a_source_naming_another_projects_job_links_nowhere(client_as, project, other_project):
    foreign = CaptureJob.objects.create(project=other_project, user_id="alice", trigger="turn", created_by="t")
    draft = services.MemoryDraft(user_id="alice", content="Foreign source.", source={"capture_job": str(foreign.pk)})
    memory = services.memory_create(project=project, draft=draft, actor="system:test", embed_inline=False)
    page = _page(client_as("viewer"), project, memory)
    assert "<dt>Capture job</dt>" not in page
    assert str(foreign.pk) not in page


def test_history_names_the_api_key_and_the_person_instead_of_raw_ids(client_as, project):
    key, _ = tenancy.api_key_create(project=project, name="support bot")
    draft = services.MemoryDraft(user_id="alice", content="Alice likes tea.")
    memory = services.memory_create(project=project, draft=draft, actor=f"api_key:{key.prefix}", embed_inline=False)
    lifecycle.memory_archive(memory=memory, actor="user:reviewer-person", reason="old")
    page = _page(client_as("viewer"), project, memory)
    history = page[page.index('id="history"') :]
    assert f"API key “support bot” ({key.prefix}…)" in history
    assert '<span class="actor">reviewer-person</span>' in history
    assert f"api_key:{key.prefix}" not in page and "user:reviewer-person" not in page


def test_incoming_links_read_from_the_readers_side(client_as, memory_factory, project):
    newer, older = memory_factory("Alice uses Neovim 0.10."), memory_factory("Alice uses Neovim.")
    edges.edge_link(source=newer, target=older, relationship="refines", actor="t")
    other = memory_factory("Alice never uses Emacs.")
    edges.edge_link(source=other, target=older, relationship="contradicts", actor="t")
    client = client_as("viewer")
    older_page, newer_page = _page(client, project, older), _page(client, project, newer)
    assert "refined by</span>" in older_page and "contradicted by</span>" in older_page
    assert "refines</span>" in newer_page and "refined by" not in newer_page


def test_the_link_search_finds_only_the_same_end_users_memories(client_as, memory_factory, project):
    memory = memory_factory("Alice writes Rust.")
    mine = memory_factory("Alice likes the borrow checker.")
    theirs = memory_factory("Bob likes the borrow checker.", user_id="bob")
    url = f"/p/{project.slug}/memories/{memory.pk}/links/search/"
    client = client_as("reviewer")
    found = client.get(url, {"q": "borrow"}).content.decode()
    assert f'value="{mine.pk}"' in found and f'value="{theirs.pk}"' not in found
    assert 'name="target"' not in client.get(url, {"q": ""}).content.decode()
    assert "No memory of alice contains" in client.get(url, {"q": "haskell"}).content.decode()
    assert client_as("viewer").get(url, {"q": "borrow"}).status_code == 403


def test_a_picked_memory_is_linked_and_a_foreign_id_answers_422(client_as, memory_factory, project):
    memory, target = memory_factory("Alice writes Go."), memory_factory("Alice likes gofmt.")
    client = client_as("reviewer")
    url = f"/p/{project.slug}/memories/{memory.pk}/links/"
    assert client.post(url, {"target": "not-a-uuid", "relationship": "refines"}).status_code == 422
    response = client.post(url, {"target": str(target.pk), "relationship": "refines"})
    assert response.status_code == 302
    assert memory.edges_out.filter(to_memory=target, relationship="refines").exists()

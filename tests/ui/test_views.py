"""What each curation page shows and does, through the Django test client."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from capture.models import CaptureJob
from memories import edges, lifecycle, review, services, tenancy
from memories.models import Membership, Memory, MemoryRevision, Status
from retrieval.models import RetrievalLog

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def count_queries(client, url, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **kwargs)
    assert response.status_code == 200
    return len(queries)


def test_the_memory_list_costs_the_same_queries_for_5_and_50_rows(
    client_as, memory_factory, project, django_assert_max_num_queries
):
    client = client_as("reviewer")
    url = f"/p/{project.slug}/memories/"
    for i in range(5):
        memory_factory(f"Small list memory {i}.", category="user-facts")
    few = count_queries(client, url)
    for i in range(45):
        memory_factory(f"Bigger list memory {i}.", user_id=f"user-{i}")
    with django_assert_max_num_queries(few):
        client.get(url)
    # The rows region needs neither the end-user suggestions nor the bulk form.
    assert count_queries(client, url, headers=HTMX) <= few - 1


def test_the_memory_page_offers_the_link_picker_only_to_people_who_may_link(client_as, memory_factory, project):
    memory = memory_factory("Linkable.")
    url = f"/p/{project.slug}/memories/{memory.pk}/"
    assert 'id="link-search"' in client_as("reviewer").get(url).content.decode()
    assert 'id="link-search"' not in client_as("viewer").get(url).content.decode()


def test_the_review_queue_costs_the_same_queries_for_5_and_50_proposals(
    client_as, memory_factory, project, django_assert_max_num_queries
):
    client = client_as("reviewer")
    url = f"/p/{project.slug}/review/"

    def propose(n):
        for i in range(n):
            job = CaptureJob.objects.create(
                project=project,
                user_id="alice",
                trigger="turn",
                created_by="t",
                window=[{"role": "user", "content": f"turn {i}"}],
            )
            memory_factory(f"Proposal {n}-{i}.", status=Status.PENDING_REVIEW, source={"capture_job": str(job.pk)})

    propose(5)
    few = count_queries(client, url)
    propose(45)
    with django_assert_max_num_queries(few):
        client.get(url)


@pytest.mark.parametrize("page", ["captures/", "retrievals/", "graph/data/?user=alice"])
def test_operations_pages_cost_the_same_queries_for_5_and_50_rows(
    client_as, memory_factory, project, page, django_assert_max_num_queries
):
    client = client_as("viewer")
    url = f"/p/{project.slug}/{page}"

    def add(n):
        for i in range(n):
            CaptureJob.objects.create(project=project, user_id="alice", trigger="turn", created_by="t")
            RetrievalLog.objects.create(
                project=project, user_id="alice", correlation_id=f"c{n}{i}", query_hash="h", latency_ms=10 + i
            )
            memory_factory(f"Graph memory {n}-{i}.")

    add(5)
    few = count_queries(client, url)
    add(45)
    with django_assert_max_num_queries(few):
        client.get(url)


def test_the_list_filters_by_end_user_category_status_and_text(client_as, memory_factory, project):
    memory_factory("Alice drinks green tea every morning.", category="user-facts")
    memory_factory("Bob prefers coffee.", user_id="bob", category="user-facts")
    memory_factory("Alice uses tabs.", category="coding-preferences")
    client = client_as("viewer")
    response = client.get(f"/p/{project.slug}/memories/", {"user": "alice", "category": "user-facts", "q": "tea"})
    rows = [m.content for m in response.context["page"].object_list]
    assert rows == ["Alice drinks green tea every morning."]


def test_an_htmx_request_for_the_list_gets_only_the_rows_region(client_as, memory_factory, project):
    memory_factory("Only rows please.")
    response = client_as("viewer").get(f"/p/{project.slug}/memories/", headers=HTMX)
    body = response.content.decode()
    assert 'id="rows"' in body and "Only rows please." in body
    assert "<html" not in body and 'id="filters"' not in body


def test_an_htmx_history_restore_of_the_list_gets_the_whole_page(client_as, memory_factory, project):
    # Back button after a history-cache miss: htmx asks again with HX-Request and swaps the
    # answer into <body>, so it must be the whole page, not the rows region.
    memory_factory("Back again.")
    headers = {**HTMX, "HX-History-Restore-Request": "true"}
    response = client_as("viewer").get(f"/p/{project.slug}/memories/", {"status": "active"}, headers=headers)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" in body and 'id="filters"' in body and "Back again." in body


def test_project_pages_vary_on_hx_request(client_as, project):
    client = client_as("viewer")
    for url in (f"/p/{project.slug}/memories/", f"/p/{project.slug}/review/", f"/p/{project.slug}/captures/"):
        for headers in ({}, HTMX):
            vary = client.get(url, headers=headers)["Vary"]
            assert "HX-Request" in [v.strip() for v in vary.split(",")], (url, vary)


def test_deleted_memories_are_listed_only_when_asked_for(client_as, memory_factory, project):
    gone = memory_factory("Deleted one.")
    lifecycle.memory_delete(memory=gone, actor="system:test")
    client = client_as("viewer")
    assert b"Deleted one." not in client.get(f"/p/{project.slug}/memories/").content
    assert b"Deleted one." in client.get(f"/p/{project.slug}/memories/", {"status": "deleted"}).content


def test_bulk_approve_approves_only_pending_memories_and_answers_with_rows(client_as, memory_factory, project):
    pending = memory_factory("Pending.", status=Status.PENDING_REVIEW)
    active = memory_factory("Already active.")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/bulk/",
        {"action": "approve", "ids": [str(pending.pk), str(active.pk)], "next": f"/p/{project.slug}/memories/"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "1 of 2 memories changed" in response.content.decode()
    assert Memory.objects.get(pk=pending.pk).status == Status.ACTIVE
    assert not MemoryRevision.objects.filter(memory=active, action="approve").exists()


def test_a_row_action_answers_htmx_with_the_updated_row(client_as, memory_factory, project):
    memory = memory_factory("Archive me from the list.")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/{memory.pk}/archive/", {"view": "row"}, headers=HTMX
    )
    body = response.content.decode()
    assert body.strip().startswith(f'<tr id="row-{memory.pk}"')
    assert "archived" in body and "Restore" in body


def test_editing_writes_a_revision_by_the_person_and_the_page_shows_the_diff(client_as, memory_factory, project):
    memory = memory_factory("The user likes black tea.")
    client = client_as("reviewer")
    fields = {
        "content": "The user likes green tea.",
        "kind": "fact",
        "category": "user-facts",
        "importance": "0.7",
        "reason": "corrected",
    }
    client.post(f"/p/{project.slug}/memories/{memory.pk}/edit/", fields)
    revision = MemoryRevision.objects.get(memory=memory, action="edit")
    assert revision.actor == "user:reviewer-person" and revision.reason == "corrected"
    page = client.get(f"/p/{project.slug}/memories/{memory.pk}/").content.decode()
    assert "<del>black</del>" in page and "<ins>green</ins>" in page
    assert "<code>category</code>" in page


def test_an_invalid_edit_answers_422_with_the_form_and_changes_nothing(client_as, memory_factory, project):
    memory = memory_factory("Stays the same.")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/{memory.pk}/edit/",
        {"content": "   ", "kind": "fact", "category": "", "importance": "2"},
        headers=HTMX,
    )
    assert response.status_code == 422
    assert 'id="detail"' in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).content == "Stays the same."


def test_superseding_twice_is_refused_with_a_conflict(client_as, memory_factory, project):
    memory = memory_factory("Version one.")
    client = client_as("reviewer")
    fields = {"content": "Version two.", "kind": "fact", "category": "", "importance": "0.5"}
    first = client.post(f"/p/{project.slug}/memories/{memory.pk}/supersede/", fields)
    successor = Memory.objects.get(supersedes=memory)
    assert first["Location"] == f"/p/{project.slug}/memories/{successor.pk}/"
    second = client.post(f"/p/{project.slug}/memories/{memory.pk}/supersede/", fields, headers=HTMX)
    assert second.status_code == 409
    assert Memory.objects.filter(supersedes__isnull=False).count() == 1


def test_the_memory_page_shows_the_supersede_chain_in_order(client_as, memory_factory, project):
    first = memory_factory("Chain v1.")
    second = services.memory_supersede(
        memory=first, draft=services.MemoryDraft(user_id="alice", content="Chain v2."), actor="t"
    )
    page = client_as("viewer").get(f"/p/{project.slug}/memories/{second.pk}/").content.decode()
    chain = page[page.index('id="chain"') :]
    assert chain.index("Chain v1.") < chain.index("Chain v2.")


def test_linking_refuses_another_end_users_memory(client_as, memory_factory, project):
    mine = memory_factory("Alice's memory.")
    theirs = memory_factory("Bob's memory.", user_id="bob")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/{mine.pk}/links/", {"target": str(theirs.pk), "relationship": "related"}
    )
    assert response.status_code == 422
    assert not mine.edges_out.exists()


def test_a_memory_of_another_project_is_not_found(client_as, other_project, project):
    foreign = services.memory_create(
        project=other_project,
        draft=services.MemoryDraft(user_id="alice", content="Rival's."),
        actor="t",
        embed_inline=False,
    )
    client = client_as("admin")
    assert client.get(f"/p/{project.slug}/memories/{foreign.pk}/").status_code == 404
    assert client.post(f"/p/{project.slug}/memories/{foreign.pk}/delete/").status_code == 404
    assert Memory.objects.get(pk=foreign.pk).status == Status.ACTIVE


def test_the_review_queue_shows_the_excerpt_the_window_and_the_proposal(client_as, memory_factory, project):
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        window=[{"role": "user", "content": "I always use dark mode."}],
    )
    memory_factory(
        "The user prefers dark mode.",
        status=Status.PENDING_REVIEW,
        source={"capture_job": str(job.pk), "excerpt": "always use dark mode"},
        metadata={"confidence": 0.64, "reason": "explicit preference"},
    )
    page = client_as("viewer").get(f"/p/{project.slug}/review/").content.decode()
    for shown in ("always use dark mode", "I always use dark mode.", "confidence 0.64", "explicit preference"):
        assert shown in page


def test_the_review_card_shows_the_cleaned_window_and_the_memorys_own_links(client_as, memory_factory, project):
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        window=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Please remember I use vim."},
            {"role": "tool", "content": "tool output that is no conversation"},
            {"role": "assistant", "content": 'Noted.<tool_call>{"name": "remember_tool"}</tool_call>'},
        ],
    )
    target = memory_factory("The user writes Python.")
    memory_factory(
        "The user uses vim.",
        status=Status.PENDING_REVIEW,
        source={"capture_job": str(job.pk)},
        metadata={"evidence": "I use vim", "related": ["not-a-link"]},
        related=[(str(target.pk), "related")],
    )
    page = client_as("viewer").get(f"/p/{project.slug}/review/").content.decode()
    assert "Please remember I use vim." in page and "Noted." in page and "I use vim" in page
    assert "helpful assistant" not in page and "tool output" not in page and "remember_tool" not in page
    assert f'href="/p/{project.slug}/memories/{target.pk}/">The user writes Python.</a>' in page
    assert "not-a-link" not in page


@pytest.mark.parametrize("garbage", ["x", 42, ["a", "b"], {"id": 1}, "00000000-0000-0000-0000-00000000000z"])
def test_a_garbage_proposed_supersedes_does_not_break_the_review_queue(client_as, memory_factory, project, garbage):
    # API keys can edit metadata: whatever it holds, the queue renders.
    memory_factory(
        "Proposed with odd metadata.", status=Status.PENDING_REVIEW, metadata={"proposed_supersedes": garbage}
    )
    response = client_as("reviewer").get(f"/p/{project.slug}/review/")
    assert response.status_code == 200
    assert "Proposed with odd metadata." in response.content.decode()
    assert "Proposes to supersede" not in response.content.decode()


def test_a_valid_proposed_supersedes_links_to_the_old_memory(client_as, memory_factory, project):
    old = memory_factory("The user likes tea.")
    memory_factory(
        "The user likes green tea.", status=Status.PENDING_REVIEW, metadata={"proposed_supersedes": str(old.pk)}
    )
    page = client_as("viewer").get(f"/p/{project.slug}/review/").content.decode()
    assert f'Proposes to supersede <a href="/p/{project.slug}/memories/{old.pk}/">' in page


def test_bulk_approve_skips_memories_another_reviewer_already_approved(client_as, memory_factory, project, monkeypatch):
    from ui.views import review as review_view

    old = memory_factory("The user lives in Paris.")
    ahead = memory_factory("Approved before the page was sent.", status=Status.PENDING_REVIEW)
    raced = memory_factory(
        "Approved while the bulk ran.", status=Status.PENDING_REVIEW, metadata={"proposed_supersedes": str(old.pk)}
    )
    others = [memory_factory(f"Still waiting {i}.", status=Status.PENDING_REVIEW) for i in range(2)]
    review.memory_approve(memory=ahead, actor="user:someone-else")
    loaded = review_view.ui_selectors.memories_by_ids

    def load_then_race(**kwargs):
        memories = loaded(**kwargs)  # ``raced`` is still pending in these objects ...
        review.memory_approve(memory=Memory.objects.get(pk=raced.pk), actor="user:someone-else")  # ... not any more
        return memories

    monkeypatch.setattr(review_view.ui_selectors, "memories_by_ids", load_then_race)
    ids = [str(m.pk) for m in (ahead, raced, *others)]
    response = client_as("reviewer").post(
        f"/p/{project.slug}/review/bulk/", {"action": "approve", "ids": ids}, headers=HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Approved 2 of 4 memories. 2 were no longer waiting for review." in body
    for memory in others:
        assert Memory.objects.get(pk=memory.pk).status == Status.ACTIVE
    assert MemoryRevision.objects.filter(memory__in=[ahead, raced], action="approve").count() == 2
    assert not MemoryRevision.objects.filter(memory__in=[ahead, raced], actor="user:reviewer-person").exists()
    # Without htmx: a redirect back to the queue.
    monkeypatch.undo()
    plain = client_as("admin").post(f"/p/{project.slug}/review/bulk/", {"action": "approve", "ids": ids})
    assert plain.status_code == 302 and plain["Location"] == f"/p/{project.slug}/review/"


def test_reject_deletes_with_the_review_reason(client_as, memory_factory, project):
    memory = memory_factory("Not worth keeping.", status=Status.PENDING_REVIEW)
    response = client_as("reviewer").post(f"/p/{project.slug}/review/{memory.pk}/reject/", headers=HTMX)
    assert 'hx-swap-oob="true"' in response.content.decode()
    revision = MemoryRevision.objects.get(memory=memory, action="delete")
    assert revision.reason == "rejected in review"


def test_edit_then_approve_saves_the_edit_and_approves(client_as, memory_factory, project):
    memory = memory_factory("The usr likes tea.", status=Status.PENDING_REVIEW)
    fields = {"content": "The user likes tea.", "kind": "preference", "category": "user-facts", "importance": "0.6"}
    client_as("reviewer").post(f"/p/{project.slug}/review/{memory.pk}/approve/", fields)
    memory.refresh_from_db()
    assert (memory.content, memory.kind, memory.status) == ("The user likes tea.", "preference", Status.ACTIVE)
    assert [r.action for r in memory.revisions.order_by("created_at", "id")] == ["create", "edit", "approve"]


def test_the_graph_data_holds_one_end_users_memories_and_their_links(client_as, memory_factory, project):
    a, b = memory_factory("Alice A."), memory_factory("Alice B.")
    memory_factory("Bob's secret.", user_id="bob")
    edges.edge_link(source=a, target=b, relationship="refines", actor="t")
    data = client_as("viewer").get(f"/p/{project.slug}/graph/data/", {"user": "alice"}).json()
    assert {n["label"] for n in data["nodes"]} == {"Alice A.", "Alice B."}
    assert data["edges"] == [{"source": str(a.pk), "target": str(b.pk), "relationship": "refines"}]
    assert data["nodes"][0]["url"].startswith(f"/p/{project.slug}/memories/")


def test_the_dashboard_shows_counts_and_the_retrieval_p95(client_as, memory_factory, project):
    memory_factory("Counted.", category="user-facts")
    for latency in range(1, 101):
        RetrievalLog.objects.create(
            project=project, user_id="alice", correlation_id=str(latency), query_hash="h", latency_ms=latency
        )
    response = client_as("viewer").get(f"/p/{project.slug}/")
    stats = response.context["stats"]
    assert stats["latency"]["p95"] == pytest.approx(95.05)
    assert ("active", "Active", 1) in stats["by_status"]
    assert "p95 95 ms" in response.content.decode()


def test_a_new_api_key_is_shown_once_and_stored_hashed(client_as, project):
    client = client_as("admin")
    response = client.post(f"/p/{project.slug}/keys/", {"name": "bot"})
    plain = response.context["plain_key"]
    assert plain in response.content.decode() and response["Cache-Control"] == "no-store"
    assert plain not in client.get(f"/p/{project.slug}/keys/").content.decode()
    assert tenancy.hash_api_key(plain) == project.api_keys.get(name="bot").key_hash


def test_settings_reject_a_bad_taxonomy_and_keep_the_old_one(client_as, project):
    before = list(project.taxonomy)
    response = client_as("admin").post(
        f"/p/{project.slug}/settings/",
        {"capture_policy": "auto", "auto_approve_confidence": "0.8", "taxonomy": "ok\nnot ok!", "token_budget": "100"},
    )
    assert response.status_code == 422
    project.refresh_from_db()
    assert project.taxonomy == before


def test_the_last_admin_cannot_step_down_or_be_removed(client_as, project):
    client = client_as("admin")
    admin = Membership.objects.get(team=project.team, role="admin")
    client.post(f"/p/{project.slug}/members/{admin.pk}/role/", {"role": "viewer"})
    client.post(f"/p/{project.slug}/members/{admin.pk}/remove/")
    assert Membership.objects.get(pk=admin.pk).role == "admin"


def test_retry_puts_a_failed_job_back_in_the_queue_with_fresh_attempts(client_as, project, settings):
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        status="failed",
        error="LLM down",
        attempts=settings.MEMORYHUB_CAPTURE_MAX_ATTEMPTS,
        created_by="t",
    )
    response = client_as("reviewer").post(f"/p/{project.slug}/captures/{job.pk}/retry/", headers=HTMX)
    job.refresh_from_db()
    assert (job.status, job.error, job.attempts) == ("queued", "", 0)
    assert f'id="job-{job.pk}"' in response.content.decode()


def test_a_person_sees_only_their_own_teams_projects(client_as, project, other_project):
    page = client_as("viewer").get("/").content.decode()
    assert f"/p/{project.slug}/" in page and f"/p/{other_project.slug}/" not in page


def test_adding_an_unknown_person_answers_the_form_with_its_error_not_a_500(client_as, project):
    """Regression: page_context() got add_form twice."""
    response = client_as("admin").post(f"/p/{project.slug}/members/", {"username": "nobody-here", "role": "viewer"})
    assert response.status_code == 422
    assert "nobody-here" in response.content.decode()


def test_an_invalid_key_form_answers_422_not_a_500(client_as, project):
    """Regression: page_context() got form twice."""
    response = client_as("admin").post(f"/p/{project.slug}/keys/", {"name": "k" * 201})
    assert response.status_code == 422


def test_the_link_picker_starts_empty_and_refuses_no_choice(client_as, memory_factory, project):
    """Regression: "Link to" preselected an arbitrary memory."""
    memory = memory_factory("One.")
    memory_factory("Two.")
    client = client_as("reviewer")
    page = client.get(f"/p/{project.slug}/memories/{memory.pk}/").content.decode()
    assert 'name="target"' not in page  # nothing to pick until the reviewer searches
    response = client.post(f"/p/{project.slug}/memories/{memory.pk}/links/", {"target": "", "relationship": "related"})
    assert response.status_code == 422
    assert not memory.edges_out.exists()


def test_hyde_is_not_shown_as_running_without_an_llm(client_as, project, settings):
    """Regression: settings and the playground showed HyDE on with no LLM configured."""
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    project.hyde_enabled = True
    project.save(update_fields=["hyde_enabled"])
    admin = client_as("admin")
    assert "HyDE does not run" in admin.get(f"/p/{project.slug}/settings/").content.decode()
    assert "Project default (off: no LLM)" in admin.get(f"/p/{project.slug}/playground/").content.decode()


def test_the_dashboard_names_memories_without_a_category_uncategorised(client_as, api, project):
    assert api.post("/memories", {"user_id": "alice", "content": "Alice plays chess."}).status_code == 201
    body = client_as("viewer").get(f"/p/{project.slug}/").content.decode()
    row = body.split('id="by-category"', 1)[1].split("</table>", 1)[0]
    assert "uncategorised" in row and "(none)" not in row


def test_the_memory_page_shows_the_messages_a_captured_memory_came_from(client_as, api, project, settings):
    from capture.pipeline import run_job

    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    said = {"role": "user", "content": "My sister Nina is a nurse in Leeds.", "timestamp": "2026-03-09T10:00:00Z"}
    body = {"user_id": "alice", "session_id": "s1", "trigger": "compaction", "messages": [said]}
    job_id = api.post("/capture", body).json()["job_id"]
    run_job(job_id=job_id)
    memory = Memory.objects.get(pk=CaptureJob.objects.get(pk=job_id).memory_ids[0])
    page = client_as("viewer").get(f"/p/{project.slug}/memories/{memory.pk}/").content.decode()
    assert 'id="source-messages"' in page and "My sister Nina is a nurse in Leeds." in page
    assert "2026-03-09 10:00" in page and 'id="source-extractor">rules<' in page

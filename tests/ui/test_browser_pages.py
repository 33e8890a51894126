"""End to end in Chromium: the memory page's link picker, people,
settings, the graph's controls, the retrieval log's drill-down, transfer and evaluation."""

from __future__ import annotations

import pytest

from memories import edges, services
from memories.models import MemoryEdge
from retrieval.models import RetrievalLog
from tests.ui.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_links_a_memory_found_by_typing(page, live_server, person, project, memory_factory):
    memory = memory_factory("Alice deploys on Fridays.")
    target = memory_factory("Alice's team freezes deploys in December.")
    memory_factory("Bob's team freezes deploys too.", user_id="bob")
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{memory.pk}/")
    assert page.locator("#link-options input[type=radio]").count() == 0  # an empty default
    page.select_option("#id_link_relationship", "contradicts")
    page.locator("#link-search").press_sequentially("freez")
    page.locator(f"#link-options input[value='{target.pk}']").check()
    assert page.locator("#link-options input[type=radio]").count() == 1  # not Bob's
    page.click("#link-form button[type=submit]")
    page.locator("#links li", has_text="December").wait_for()
    assert page.locator("#links .rel").first.inner_text() == "contradicts"
    assert MemoryEdge.objects.filter(from_memory=memory, to_memory=target, relationship="contradicts").exists()
    page.click("#links a")
    page.locator("#links .rel", has_text="contradicted by").wait_for()


def test_an_admin_creates_a_person_and_the_link_lets_them_sign_in(page, live_server, person, project):
    sign_in(page, live_server, person("admin"))
    page.goto(f"{live_server.url}/p/{project.slug}/members/")
    page.fill("#id_new_username", "frank")
    page.select_option("#id_new_role", "reviewer")
    page.click("#person-form button[type=submit]")
    link = page.locator("#invite-url").input_value()
    page.context.clear_cookies()
    page.goto(link)
    page.fill("#id_new_password1", "frank's long passphrase 7")
    page.fill("#id_new_password2", "frank's long passphrase 7")
    page.click("#set-password-form button[type=submit]")
    page.fill("#id_username", "frank")
    page.fill("#id_password", "frank's long passphrase 7")
    page.click("button[type=submit]")
    page.locator(f"#project-{project.slug}").wait_for()
    assert page.locator(f"#project-{project.slug} .active-count").inner_text() == "0"


OVERLAPS = """() => {
  const boxes = [...document.querySelectorAll('#graph text.node-label')].map(t => t.getBBox());
  let n = 0;
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
    if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) n++;
  }));
  return n;
}"""


def _graph_of_twelve(project, memory_factory):
    made = [
        memory_factory(f"Alice note {i} about {'Neovim' if i < 3 else 'tea'}.", category=project.taxonomy[i % 3])
        for i in range(12)
    ]
    edges.edge_link(source=made[0], target=made[1], relationship="refines", actor="t")
    return made


def test_the_graph_shows_linked_only_and_groups_by_category(page, live_server, person, project, memory_factory):
    _graph_of_twelve(project, memory_factory)
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    page.locator("#graph circle").nth(11).wait_for()
    page.check("#graph-linked-only")
    page.wait_for_function("() => document.querySelectorAll('#graph circle').length === 2")
    assert page.locator("#graph line.edge").count() == 1
    page.uncheck("#graph-linked-only")
    page.check("#graph-group")
    page.locator("#graph text.group-label").nth(2).wait_for()
    assert sorted(page.locator("#graph text.group-label").all_text_contents()) == sorted(project.taxonomy[:3])
    assert page.locator("#graph circle").count() == 12


def test_the_graph_search_highlights_matches_and_labels_never_overlap(
    page, live_server, person, project, memory_factory
):
    _graph_of_twelve(project, memory_factory)
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    page.locator("#graph circle").nth(11).wait_for()
    assert page.locator("#graph text.node-label").count() > 0
    assert page.evaluate(OVERLAPS) == 0
    page.fill("#graph-search", "neovim")
    page.wait_for_function("() => document.querySelectorAll('#graph .node.match').length === 3")
    assert page.locator("#graph .node.dim").count() == 9
    assert page.locator("#graph text.node-label").count() == 3  # only the matches are labelled
    assert "3 match" in page.locator("#graph-status").inner_text()
    assert page.evaluate(OVERLAPS) == 0


def test_labels_of_a_crowded_graph_do_not_collide(page, live_server, person, project):
    drafts = [services.MemoryDraft(user_id="alice", content=f"Crowded memory number {i}.") for i in range(80)]
    made = services.memory_bulk_create(project=project, drafts=drafts, actor="t")
    for i in range(79):  # a dense chain pulls the nodes together
        edges.edge_link(source=made[i], target=made[i + 1], relationship="related", actor="t")
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    page.locator("#graph circle").nth(79).wait_for()
    labelled = page.locator("#graph text.node-label").count()
    print(f"{labelled} of 80 nodes labelled without overlap")
    assert labelled > 0 and page.evaluate(OVERLAPS) == 0


def test_the_retrieval_log_drills_into_what_a_call_returned(page, live_server, person, project, memory_factory):
    first, second = memory_factory("Alice drinks green tea."), memory_factory("Alice dislikes coffee.")
    RetrievalLog.objects.create(
        project=project, user_id="alice", correlation_id="corr-1", query_hash="h", result_count=2,
        memory_ids=[str(first.pk), str(second.pk)], scores=[0.91, 0.42], latency_ms=31.0,
        timings={"search": 12.0, "embed": 9.5, "total": 31.0},
    )  # fmt: skip
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/retrievals/")
    page.click("#logs tbody a")
    rows = page.locator("#returned tbody tr")
    rows.nth(1).wait_for()
    assert rows.nth(0).locator(".score").inner_text() == "0.910"
    assert "Alice dislikes coffee." in rows.nth(1).inner_text()
    assert page.locator("#stages tbody tr").first.inner_text().startswith("search")
    rows.nth(0).locator("a").click()
    page.wait_for_url(f"**/memories/{first.pk}/")


def test_an_admin_imports_a_file_and_sees_each_rejected_line(page, live_server, person, project, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header", "format": "memoryhub-export", "version": 1}\n{"type": "memory"}\n[]\n')
    sign_in(page, live_server, person("admin"))
    page.goto(f"{live_server.url}/p/{project.slug}/transfer/")
    page.set_input_files("#id_file", str(bad))
    page.click("#import-form button[type=submit]")
    page.locator("#rejected-lines tbody tr").nth(1).wait_for()
    assert page.locator("#import-rejected").inner_text().startswith("2 lines of bad.jsonl rejected")
    assert page.locator("#rejected-lines tbody tr").nth(1).inner_text().startswith("3")
    with page.expect_download() as download:
        page.click("#export-form button[type=submit]")
    assert download.value.suggested_filename == f"{project.slug}.jsonl"

"""The retrieval playground: the real pipeline run for one end user, every candidate explained."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memories import edges, services
from memories.models import Memory, Project
from retrieval.models import RetrievalLog
from retrieval.ranking.keyword_stats import refresh_keyword_stats
from tests.ui.test_browser import sign_in
from ui.views.playground import parse_conversation

DEPLOY = "Alice deploys the billing service with Kubernetes."
FACTS = [
    "Alice prefers tabs over spaces in Go code.",
    DEPLOY,
    "Alice's favourite drink is green tea.",
    "Alice is allergic to peanuts.",
]
QUESTION = "How does Alice deploy the billing service?"
# The profile the injection starts with is one more read.
QUERIES = 17


@pytest.fixture
def remember(project: Project) -> Callable[..., Memory]:
    """Write a memory through the services and embed it inline with the real local model."""

    def make(content: str, *, user_id: str = "alice") -> Memory:
        draft = services.MemoryDraft(user_id=user_id, content=content)
        return services.memory_create(project=project, draft=draft, actor="system:test")

    return make


@pytest.fixture
def facts(remember: Callable[..., Memory]) -> dict[str, Memory]:
    return {content: remember(content) for content in FACTS}


def url(project: Project) -> str:
    return f"/p/{project.slug}/playground/"


def ask(client: Any, project: Project, text: str = QUESTION, *, htmx: bool = False, **options: Any) -> Any:
    headers = {"HX-Request": "true"} if htmx else {}
    return client.get(url(project), {"user": "alice", "text": text, **options}, headers=headers)


@pytest.mark.django_db
def test_a_viewer_sees_the_matching_memory_ranked_first_and_injected(client_as, project, facts):
    response = ask(client_as("viewer"), project)
    assert response.status_code == 200
    rows = response.context["results"]["rows"]
    assert [rows[0].memory.content, rows[0].outcome, rows[0].passed] == [DEPLOY, "included", True]
    assert rows[0].candidate.keyword_rank == 1 and rows[0].candidate.vector_rank == 1
    html = response.content.decode()
    assert f'href="/p/{project.slug}/memories/{facts[DEPLOY].pk}/"' in html
    assert DEPLOY in response.context["results"]["body"].injection
    assert '<pre class="injection" id="injection">' in html


@pytest.mark.django_db
def test_words_too_common_to_search_are_named(client_as, project, facts, settings):
    # "Alice" is in every one of her memories: full text leaves it out and says so.
    settings.MEMORYHUB_KEYWORD_STATS_MIN_ROWS, settings.MEMORYHUB_KEYWORD_MAX_SHARE = len(FACTS), 0.5
    refresh_keyword_stats(project_id=project.pk)
    response = ask(client_as("viewer"), project)
    assert response.context["results"]["trace"].skipped_words == ["alic"]
    assert response.context["results"]["rows"][0].memory.content == DEPLOY
    assert 'id="skipped-words"' in response.content.decode()
    assert "<code>alic</code>" in response.content.decode()


@pytest.mark.django_db
def test_a_memory_below_min_score_is_shown_but_not_injected(client_as, project, facts):
    rows = ask(client_as("viewer"), project).context["results"]["rows"]
    peanuts = next(row for row in rows if row.memory.content == "Alice is allergic to peanuts.")
    assert (peanuts.passed, peanuts.outcome, peanuts.outcome_label) == (False, "below", "Below the cut")


@pytest.mark.django_db
def test_a_memory_that_cannot_hold_the_asked_answer_says_so(client_as, project, remember):
    remember("Alice's dad is called Salvo.")
    rows = ask(client_as("viewer"), project, "What is Alice's mum called?").context["results"]["rows"]
    assert rows, "the memory is a candidate"
    row = rows[0]
    assert (row.passed, row.outcome, row.outcome_label) == (True, "unanswering", "Holds no answer of the asked kind")


@pytest.mark.django_db
def test_a_tight_token_budget_excludes_the_rest_by_budget(client_as, project, facts):
    # The injection's header alone takes about 100 tokens: room for the header and one memory.
    results = ask(client_as("viewer"), project, min_score="0", token_budget="130").context["results"]
    outcomes = [row.outcome for row in results["rows"]]
    assert outcomes == ["included", "budget", "budget", "budget"]
    assert 0 < results["body"].token_count <= 130


@pytest.mark.django_db
def test_a_graph_neighbour_shows_the_memory_and_relationship_that_brought_it(client_as, project, facts):
    peanuts = facts["Alice is allergic to peanuts."]
    edges.edge_link(source=facts[DEPLOY], target=peanuts, relationship="related", actor="system:test")
    rows = ask(client_as("viewer"), project).context["results"]["rows"]
    row = next(row for row in rows if row.memory.pk == peanuts.pk)
    assert (row.via.pk, row.relationship, row.outcome) == (facts[DEPLOY].pk, "related", "included")


def test_a_pasted_conversation_becomes_messages_and_plain_text_stays_a_question():
    text = "user: I ship the billing service today.\nassistant: Need help?\nuser: How do I deploy it?\nthanks"
    assert parse_conversation(text) == [
        {"role": "user", "content": "I ship the billing service today."},
        {"role": "assistant", "content": "Need help?"},
        {"role": "user", "content": "How do I deploy it?\nthanks"},
    ]
    assert parse_conversation("How do I deploy: the billing service?") == []


@pytest.mark.django_db
def test_a_conversation_is_searched_by_its_last_user_message(client_as, project, facts):
    text = "user: I like tea.\nassistant: Noted.\nUser: How does Alice deploy the billing service?"
    results = ask(client_as("viewer"), project, text=text).context["results"]
    assert len(results["conversation"]) == 3
    assert results["rows"][0].memory.content == DEPLOY


@pytest.mark.django_db
def test_a_person_outside_the_team_gets_404(client_as, project, facts):
    assert ask(client_as("outsider"), project).status_code == 404


@pytest.mark.django_db
def test_an_htmx_request_gets_only_the_results_region(client_as, project, facts):
    response = ask(client_as("viewer"), project, htmx=True)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="results"') and DEPLOY in html
    assert "<html" not in html and 'id="playground"' not in html


@pytest.mark.django_db
def test_an_empty_question_is_refused_with_the_reason_in_the_results(client_as, project):
    response = ask(client_as("viewer"), project, text="  ", htmx=True)
    assert response.status_code == 422
    assert "Question or conversation: This field is required." in response.content.decode()


@pytest.mark.django_db
def test_the_page_loads_all_candidates_memories_in_one_query(
    client_as, project, remember, facts, django_assert_max_num_queries
):
    for i in range(12):
        remember(f"Alice shipped release {i} of the billing service on a Friday.")
    client = client_as("viewer")
    # Sign-in, access, end users, the engine's own statements and its log, and ONE load of
    # the 16 candidates' memories: a query per candidate would blow well past this.
    with django_assert_max_num_queries(QUERIES):
        response = ask(client, project)
    assert len(response.context["results"]["rows"]) == 16


@pytest.mark.django_db
def test_the_playground_spends_no_rate_limit_and_writes_no_retrieval_log(client_as, project, facts):
    Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=1)
    client = client_as("viewer")
    for _ in range(3):
        assert ask(client, project).context["results"]["body"].degraded == []
    assert not RetrievalLog.objects.filter(project=project).exists()


@pytest.mark.django_db
def test_hyde_hypotheses_are_listed(client_as, project, facts, settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.script_chat("1. Alice deploys with Kubernetes.\n2. Alice uses Helm charts.")
    response = ask(client_as("viewer"), project, hyde="on")
    assert response.context["results"]["body"].hypotheses == [
        "Alice deploys with Kubernetes.",
        "Alice uses Helm charts.",
    ]
    assert "<li>Alice uses Helm charts.</li>" in response.content.decode()
    assert response.context["results"]["rows"][0].candidate.hyde_rank is not None


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_viewer_asks_in_the_browser_and_sees_the_ranked_table(page, live_server, person, project, remember):
    for content in FACTS:
        remember(content)
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/")
    page.get_by_role("link", name="Playground").click()
    page.get_by_label("End user").fill("alice")
    page.get_by_label("Question or conversation").fill(QUESTION)
    page.get_by_role("button", name="Retrieve").click()
    first = page.locator("#candidates tbody tr").first
    first.wait_for()
    assert DEPLOY in first.locator("td.content").inner_text()
    assert first.locator("[data-label=Outcome]").inner_text() == "Included"
    assert "user=alice" in page.url  # htmx pushed the real GET URL
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scrolling on a phone


@pytest.mark.django_db
def test_with_the_embedder_down_the_page_shows_the_cut_the_engine_applied(
    client_as, project, facts, settings, fake_openai
):
    from retrieval.embedding import embedders
    from retrieval.ranking import relevance
    from tests.support.openai_server import Fault

    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    Project.objects.filter(pk=project.pk).update(active_embedding_model="fake-embed")
    embedders.reset_embedder_cache()
    fake_openai.script_embeddings(Fault(status=503))
    try:
        results = ask(client_as("viewer"), project).context["results"]
    finally:
        embedders.reset_embedder_cache()
    assert "embedder_unavailable" in results["body"].degraded
    assert results["threshold"] == relevance.KEYWORD_ONLY.min_score
    assert results["rows"][0].memory.content == DEPLOY and results["rows"][0].passed

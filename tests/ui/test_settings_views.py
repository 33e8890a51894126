"""Settings: the LLM's real state, the rate limit and the project's min_score."""

from __future__ import annotations

import pytest

from memories.models import Project

BASE = {
    "capture_policy": "review",
    "auto_approve_confidence": "0.8",
    "taxonomy": "user-facts\nlesson",
    "token_budget": "800",
}


def test_an_admin_sets_the_rate_limit_and_min_score_and_empties_it_again(client_as, project):
    client, url = client_as("admin"), f"/p/{project.slug}/settings/"
    assert client.post(url, {**BASE, "retrieval_rate_limit": "25", "min_score": "0.35"}).status_code == 302
    project.refresh_from_db()
    assert (project.retrieval_rate_limit, project.min_score) == (25, 0.35)
    page = client.get(url).content.decode()
    assert 'name="min_score" value="0.35"' in page and 'name="retrieval_rate_limit" value="25"' in page
    assert client.post(url, {**BASE, "retrieval_rate_limit": "0", "min_score": ""}).status_code == 302
    project.refresh_from_db()
    assert (project.retrieval_rate_limit, project.min_score) == (0, None)


@pytest.mark.parametrize(("field", "value"), [("min_score", "1.5"), ("min_score", "x"), ("retrieval_rate_limit", "-1")])
def test_an_out_of_range_setting_answers_422_and_changes_nothing(client_as, project, field, value):
    data = {**BASE, "retrieval_rate_limit": "10", "min_score": "", field: value}
    response = client_as("admin").post(f"/p/{project.slug}/settings/", data)
    assert response.status_code == 422
    assert Project.objects.get(pk=project.pk).capture_policy == "auto"


def test_settings_say_whether_an_llm_is_configured(client_as, project, settings):
    client, url = client_as("viewer"), f"/p/{project.slug}/settings/"
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    page = client.get(url).content.decode()
    assert "not configured" in page and "rule-based extractor" in page
    settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = "http://127.0.0.1:9/v1", "tiny-model"
    page = client.get(url).content.decode()
    assert "not configured" not in page and "<code>tiny-model</code> at http://127.0.0.1:9/v1" in page

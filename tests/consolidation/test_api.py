"""POST /users/{user_id}/consolidate and GET /consolidations/{job_id} (docs/api.md)."""

from __future__ import annotations

import pytest

from consolidation import services
from consolidation.models import ConsolidationRun
from memories.models import CapturePolicy, Project
from tests.consolidation.conftest import remember
from tests.consolidation.test_observations import WORK, observer_reply

pytestmark = pytest.mark.django_db

DUPLICATES = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")
# Every count the answer carries, the four of merges and the three of observations (ADR 0110).
COUNTS = ("merged", "superseded", "kept", "proposed", "observed", "observations_proposed", "observation_groups")


def test_a_consolidation_is_accepted_reported_while_queued_and_when_done(api, make_memory):
    for text in DUPLICATES:
        make_memory(content=text)
    accepted = api.post("/users/alice/consolidate", None)
    assert accepted.status_code == 202, accepted.content
    job_id = accepted.json()["job_id"]
    assert accepted.json() == {"job_id": job_id, "status": "queued"}
    # Asked again while it waits: the same run answers.
    assert api.post("/users/alice/consolidate", None).json()["job_id"] == job_id
    queued = api.get(f"/consolidations/{job_id}", user_id="alice")
    assert queued.status_code == 200
    body = queued.json()
    assert body["status"] == "queued" and body["user_id"] == "alice" and body["trigger"] == "api"
    assert body["counts"] == dict.fromkeys(COUNTS, 0) and body["actions"] == []
    assert services.consolidation_run(run_id=job_id) == "done"
    done = api.get(f"/consolidations/{job_id}", user_id="alice").json()
    assert done["status"] == "done" and done["counts"]["merged"] == 1 and done["compared"] == 2 and done["full"]
    [action] = done["actions"]
    assert action["action"] == "merge" and action["status"] == "applied" and action["reason"]
    assert {action["survivor_id"], action["retired_id"]} <= {
        m["id"] for m in api.get("/memories", user_id="alice").json()["items"]
    }
    assert done["finished_at"] and done["error"] is None


def test_another_users_or_tenants_consolidation_is_a_404(api, other_api):
    job_id = api.post("/users/alice/consolidate", None).json()["job_id"]
    for response in (
        api.get(f"/consolidations/{job_id}", user_id="mallory"),
        other_api.get(f"/consolidations/{job_id}", user_id="alice"),
        api.get("/consolidations/not-a-job", user_id="alice"),
        api.get("/consolidations/00000000-0000-0000-0000-000000000000", user_id="alice"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    # Each tenant's run of "alice" is its own.
    assert other_api.post("/users/alice/consolidate", None).json()["job_id"] != job_id


def test_a_missing_user_id_or_an_overlong_one_is_a_422(api):
    job_id = api.post("/users/alice/consolidate", None).json()["job_id"]
    missing = api.get(f"/consolidations/{job_id}")
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "validation_error"
    overlong = api.post(f"/users/{'x' * 256}/consolidate", None)
    assert overlong.status_code == 422 and overlong.json()["error"]["code"] == "invalid_user_id"


def test_without_a_key_it_is_a_401(client):
    assert client.post("/api/v1/users/alice/consolidate").status_code == 401
    assert client.get("/api/v1/consolidations/x?user_id=alice").status_code == 401


def test_the_counts_report_the_observations_a_run_proposed(api, project, settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.default_chat = observer_reply()
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    for text in WORK:
        remember(project, text)
    job_id = api.post("/users/alice/consolidate", None).json()["job_id"]
    assert services.consolidation_run(run_id=job_id) == "done"
    counts = api.get(f"/consolidations/{job_id}", user_id="alice").json()["counts"]
    assert set(counts) == set(COUNTS)
    assert counts["observations_proposed"] == 1 and counts["observed"] == 0 and counts["observation_groups"] == 1
    assert counts["merged"] == counts["superseded"] == counts["proposed"] == 0


def test_a_run_stored_before_observations_reports_them_as_zero(api, project):
    run = ConsolidationRun.objects.create(
        project=project, user_id="alice", trigger="api", status="done", counts={"merged": 2, "kept": 1}, created_by="t"
    )
    counts = api.get(f"/consolidations/{run.pk}", user_id="alice").json()["counts"]
    assert counts == {**dict.fromkeys(COUNTS, 0), "merged": 2, "kept": 1}

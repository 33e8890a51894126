"""GET /capture/{job_id} is user-scoped like every other user request."""

from __future__ import annotations


def test_capture_job_status_needs_the_user_and_hides_other_users_jobs(api):
    body = {"user_id": "alice", "session_id": "s1", "trigger": "turn", "messages": [{"role": "user", "content": "Hi"}]}
    job_id = api.post("/capture", body).json()["job_id"]
    assert api.get(f"/capture/{job_id}").status_code == 422
    assert api.get(f"/capture/{job_id}", user_id="mallory").status_code == 404
    assert api.get(f"/capture/{job_id}", user_id="alice").json()["user_id"] == "alice"

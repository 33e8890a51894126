"""POST /capture, GET /capture/{id} and POST /observations: acceptance, limits, coalescing."""

from __future__ import annotations

import pytest

from capture.models import CaptureJob
from common.redis import redis_client
from conversations.models import Message

WINDOW = [
    {"role": "user", "content": "I always use pytest fixtures, never setUp."},
    {"role": "assistant", "content": "Noted, fixtures it is."},
]


def capture(api, messages=WINDOW, **fields):
    body = {"user_id": "alice", "session_id": "s1", "trigger": "turn", "messages": messages, **fields}
    return api.post("/capture", body)


def test_capture_answers_202_with_a_queued_job_holding_the_window(api):
    response = capture(api)
    assert response.status_code == 202
    job = CaptureJob.objects.get(pk=response.json()["job_id"])
    assert response.json() == {"job_id": str(job.pk), "status": "queued"}
    assert (job.user_id, job.session_id, job.trigger, as_sent(job.window)) == ("alice", "s1", "turn", WINDOW)
    # Each message is kept in the session's conversation, and the window names it.
    stored = Message.objects.filter(conversation__user_id="alice", conversation__session_id="s1").order_by("seq")
    assert [entry["message_id"] for entry in job.window] == [str(m.pk) for m in stored]


def as_sent(window):
    """The window without the ids of the stored messages the service added."""
    return [{k: v for k, v in entry.items() if k != "message_id"} for entry in window]


def test_capture_queues_the_task_only_after_the_transaction_commits(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        capture(api)
    assert redis_client().llen("celery") == 0
    callbacks[0]()
    assert redis_client().llen("celery") == 1


def test_capture_keeps_tool_calls_and_extra_keys_of_messages(api):
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function"}]}
    response = capture(api, messages=[*WINDOW, call])
    job = CaptureJob.objects.get(pk=response.json()["job_id"])
    assert as_sent(job.window)[-1] == call


def test_capture_with_an_unknown_trigger_is_a_422(api):
    response = capture(api, trigger="hourly")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


def test_capture_without_messages_is_a_422(api):
    assert capture(api, messages=[]).status_code == 422


def test_capture_of_a_message_without_a_role_is_a_422(api):
    response = capture(api, messages=[{"content": "hello"}])
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "messages.0.role: Field required"


def test_capture_with_more_messages_than_the_limit_is_a_413(api, settings):
    settings.MEMORYHUB_MAX_CAPTURE_MESSAGES = 3
    response = capture(api, messages=WINDOW * 2)
    assert response.status_code == 413
    assert response.json()["error"] == {
        "code": "too_many_messages",
        "message": "4 messages in one request; the limit is 3",
        "details": None,
    }
    assert CaptureJob.objects.count() == 0


def test_capture_with_an_oversize_message_is_a_413_naming_the_message(api, settings):
    settings.MEMORYHUB_MAX_MESSAGE_CHARS = 100
    response = capture(api, messages=[*WINDOW, {"role": "user", "content": "x" * 101}])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "message_too_large"
    assert response.json()["error"]["message"] == "messages[2] has 101 characters; the limit is 100"


def test_capture_with_an_unknown_field_is_a_422(api):
    assert capture(api, trigerr="turn").status_code == 422


def test_capture_job_reports_its_status_memories_and_error(api):
    job_id = capture(api).json()["job_id"]
    body = api.get(f"/capture/{job_id}", user_id="alice").json()
    assert (body["job_id"], body["status"], body["memory_ids"], body["error"]) == (job_id, "queued", [], None)
    assert (body["trigger"], body["user_id"], body["attempts"], body["items"]) == ("turn", "alice", 0, [])


@pytest.mark.parametrize("job_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_capture_job_that_does_not_exist_is_a_404(api, job_id):
    response = api.get(f"/capture/{job_id}", user_id="alice")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_capture_job_of_another_project_is_a_404(api, other_api):
    job_id = capture(other_api).json()["job_id"]
    assert api.get(f"/capture/{job_id}", user_id="alice").status_code == 404


def test_capture_job_asked_for_with_another_user_id_is_a_404(api):
    job_id = capture(api).json()["job_id"]
    assert api.get(f"/capture/{job_id}", user_id="mallory").status_code == 404


def test_a_newer_turn_coalesces_an_unstarted_turn_and_holds_its_window(api):
    first = capture(api, messages=WINDOW[:1]).json()["job_id"]
    second = capture(api, messages=[{"role": "user", "content": "Also: I work in Berlin."}]).json()["job_id"]
    older, newer = CaptureJob.objects.get(pk=first), CaptureJob.objects.get(pk=second)
    assert (older.status, older.coalesced_into_id) == ("coalesced", newer.pk)
    assert as_sent(newer.window) == [WINDOW[0], {"role": "user", "content": "Also: I work in Berlin."}]
    assert api.get(f"/capture/{first}", user_id="alice").json()["coalesced_into"] == second


def test_a_newer_turn_repeating_the_whole_window_replaces_the_older_window(api):
    capture(api, messages=WINDOW[:1])
    second = capture(api, messages=WINDOW).json()["job_id"]
    assert as_sent(CaptureJob.objects.get(pk=second).window) == WINDOW


def test_compaction_jobs_are_never_coalesced_and_do_not_coalesce(api):
    turn = capture(api).json()["job_id"]
    compaction = capture(api, trigger="compaction").json()["job_id"]
    later = capture(api, trigger="compaction").json()["job_id"]
    statuses = {j.pk.hex: j.status for j in CaptureJob.objects.all()}
    assert [statuses[i.replace("-", "")] for i in (turn, compaction, later)] == ["queued", "queued", "queued"]


def test_turns_of_other_users_and_sessions_are_not_coalesced(api):
    capture(api)
    capture(api, user_id="mallory")
    capture(api, session_id="s2")
    assert CaptureJob.objects.filter(status="queued").count() == 3


def test_unstarted_turns_fold_into_the_newest_with_their_messages_in_order(api):
    first = capture(api, messages=[{"role": "user", "content": "I live in Lisbon."}]).json()["job_id"]
    second = capture(api, messages=[{"role": "user", "content": "I work at Acme."}]).json()["job_id"]
    third = capture(api, messages=[{"role": "user", "content": "I play the cello."}]).json()["job_id"]
    jobs = {str(j.pk): j for j in CaptureJob.objects.all()}
    assert [jobs[i].status for i in (first, second, third)] == ["coalesced", "coalesced", "queued"]
    assert [m["content"] for m in jobs[third].window] == ["I live in Lisbon.", "I work at Acme.", "I play the cello."]
    assert (jobs[first].coalesced_into_id, jobs[second].coalesced_into_id) == (jobs[second].pk, jobs[third].pk)


def test_a_turn_folds_several_unstarted_turns_oldest_first(api):
    # Two queued turns side by side (as two requests committing at once can leave them).
    older = [
        CaptureJob.objects.create(
            project=api.project, user_id="alice", session_id="s1", trigger="turn", window=[m], created_by="test"
        )
        for m in ({"role": "user", "content": "I live in Lisbon."}, {"role": "user", "content": "I work at Acme."})
    ]
    newest = capture(api, messages=[{"role": "user", "content": "I play the cello."}]).json()["job_id"]
    job = CaptureJob.objects.get(pk=newest)
    assert [m["content"] for m in job.window] == ["I live in Lisbon.", "I work at Acme.", "I play the cello."]
    assert job.payload["coalesced"] == [str(o.pk) for o in older]


def test_turns_of_the_same_user_and_session_in_another_project_are_not_coalesced(api, other_api):
    capture(api)
    capture(other_api)
    assert CaptureJob.objects.filter(status="queued").count() == 2


def test_a_started_turn_is_not_coalesced(api):
    first = capture(api).json()["job_id"]
    CaptureJob.objects.filter(pk=first).update(status="running")
    capture(api)
    assert CaptureJob.objects.get(pk=first).status == "running"


def test_capture_into_a_conversation_stores_the_new_messages_and_windows_its_tail(api):
    conversation = api.post("/conversations", {"user_id": "alice", "session_id": "s9"}).json()["id"]
    capture(api, messages=WINDOW[:1], conversation_id=conversation)
    job_id = capture(api, messages=WINDOW[1:], conversation_id=conversation, trigger="compaction").json()["job_id"]
    job = CaptureJob.objects.get(pk=job_id)
    assert list(Message.objects.filter(conversation_id=conversation).values_list("seq", "content")) == [
        (1, WINDOW[0]["content"]),
        (2, WINDOW[1]["content"]),
    ]
    assert [(m["role"], m["content"]) for m in job.window] == [(m["role"], m["content"]) for m in WINDOW]
    assert (str(job.conversation_id), job.session_id) == (conversation, "s1")


def test_capture_into_another_users_conversation_is_a_404_and_stores_nothing(api):
    conversation = api.post("/conversations", {"user_id": "mallory"}).json()["id"]
    response = capture(api, conversation_id=conversation)
    assert response.status_code == 404
    assert (Message.objects.count(), CaptureJob.objects.count()) == (0, 0)


def observe(api, output, **fields):
    body = {"user_id": "alice", "step_name": "check-db", "step_type": "GOAL", "output": output, **fields}
    return api.post("/observations", body)


def test_observation_answers_202_with_a_queued_job(api):
    output = "Found that the API rate limit is 100 requests per minute for the free tier."
    response = observe(api, output)
    assert response.status_code == 202
    job = CaptureJob.objects.get(pk=response.json()["job_id"])
    assert (job.trigger, job.status, job.payload["step_name"], job.payload["output"]) == (
        "observation",
        "queued",
        "check-db",
        output,
    )


def test_an_observation_under_50_characters_is_skipped_as_a_finished_job(api):
    response = observe(api, "Done.")
    assert response.json()["status"] == "done"
    body = api.get(f"/capture/{response.json()['job_id']}", user_id="alice").json()
    assert (body["memory_ids"], body["error"]) == ([], None)
    assert body["note"] == "output shorter than 50 characters: nothing to extract"


def test_an_observation_over_4000_characters_is_truncated(api):
    output = "The service returned HTTP 500 when the cache was cold. " * 100
    job = CaptureJob.objects.get(pk=observe(api, output).json()["job_id"])
    assert len(output) > 4000 >= len(job.payload["output"])
    assert job.payload["output"].endswith("cold.")


def test_an_observation_over_the_message_limit_is_a_413(api, settings):
    settings.MEMORYHUB_MAX_MESSAGE_CHARS = 1000
    response = observe(api, "x" * 1001)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "output_too_large"


def test_an_observation_without_a_step_name_is_a_422(api):
    assert observe(api, "y" * 80, step_name="").status_code == 422

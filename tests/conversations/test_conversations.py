"""Durable conversations: Postgres first, the Redis session tail second, embeddings in the background."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from common.redis import redis_client
from conversations.models import Message
from conversations.session import session_key
from retrieval.vectors.message_vectors import embed_messages, messages_awaiting_embedding

pytestmark = pytest.mark.django_db

TURN = [
    {"role": "user", "content": "I deploy with Helm.", "correlation_id": "turn-1"},
    {"role": "assistant", "content": "Helm it is.", "tool_calls": [{"id": "c1", "type": "function"}]},
]


def start(api, user_id="alice"):
    response = api.post("/conversations", {"user_id": user_id, "session_id": "s1", "title": "Deploys"})
    assert response.status_code == 201
    return response.json()["id"]


def add(api, conversation, messages=TURN, user_id="alice"):
    return api.post(f"/conversations/{conversation}/messages", {"user_id": user_id, "messages": messages})


def test_messages_are_stored_with_consecutive_seqs_and_their_extra_parts(api):
    conversation = start(api)
    add(api, conversation)
    response = add(api, conversation, [{"role": "user", "content": "Thanks!"}])
    assert response.status_code == 201
    body = api.get(f"/conversations/{conversation}", user_id="alice").json()
    assert [(m["seq"], m["role"], m["content"]) for m in body["messages"]] == [
        (1, "user", "I deploy with Helm."),
        (2, "assistant", "Helm it is."),
        (3, "user", "Thanks!"),
    ]
    assert body["messages"][0]["correlation_id"] == "turn-1"
    assert body["messages"][1]["extra"] == {"tool_calls": [{"id": "c1", "type": "function"}]}
    assert (body["title"], body["session_id"]) == ("Deploys", "s1")


def test_get_conversation_pages_with_after_and_limit(api):
    conversation = start(api)
    add(api, conversation, [{"role": "user", "content": f"message {n}"} for n in range(5)])
    body = api.get(f"/conversations/{conversation}", user_id="alice", after=2, limit=2).json()
    assert [m["seq"] for m in body["messages"]] == [3, 4]


def test_recent_messages_are_rebuilt_from_postgres_then_served_from_redis(api, django_capture_on_commit_callbacks):
    conversation = start(api)
    with django_capture_on_commit_callbacks(execute=True):
        add(api, conversation)
    first = api.get(f"/conversations/{conversation}/recent", user_id="alice").json()
    with django_capture_on_commit_callbacks(execute=True):
        add(api, conversation, [{"role": "user", "content": "And Argo for rollbacks."}])
    second = api.get(f"/conversations/{conversation}/recent", user_id="alice").json()
    assert (first["source"], [m["seq"] for m in first["messages"]]) == ("database", [1, 2])
    assert (second["source"], [m["content"] for m in second["messages"]][-1]) == ("redis", "And Argo for rollbacks.")
    assert second["messages"][1]["tool_calls"] == [{"id": "c1", "type": "function"}]


def test_recent_messages_survive_redis_losing_them(api):
    conversation = start(api)
    add(api, conversation)
    api.get(f"/conversations/{conversation}/recent", user_id="alice")
    redis_client().flushdb()
    body = api.get(f"/conversations/{conversation}/recent", user_id="alice").json()
    assert (body["source"], [m["content"] for m in body["messages"]]) == (
        "database",
        ["I deploy with Helm.", "Helm it is."],
    )


def test_the_session_tail_keeps_the_last_n_messages_for_24_hours(api, settings, django_capture_on_commit_callbacks):
    settings.MEMORYHUB_SESSION_MESSAGES = 3
    conversation = start(api)
    add(api, conversation, [{"role": "user", "content": f"message {n}"} for n in range(5)])
    api.get(f"/conversations/{conversation}/recent", user_id="alice")
    with django_capture_on_commit_callbacks(execute=True):
        add(api, conversation, [{"role": "user", "content": "message 5"}])
    body = api.get(f"/conversations/{conversation}/recent", user_id="alice").json()
    assert [m["seq"] for m in body["messages"]] == [4, 5, 6]
    assert redis_client().llen(session_key(conversation)) == 3
    assert 24 * 3600 - 5 <= redis_client().ttl(session_key(conversation)) <= 24 * 3600


@pytest.mark.parametrize("path", ["", "/recent"])
def test_another_users_conversation_is_a_404(api, path):
    conversation = start(api, user_id="mallory")
    response = api.get(f"/conversations/{conversation}{path}", user_id="alice")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


def test_another_projects_conversation_is_a_404(api, other_api):
    conversation = start(other_api)
    assert add(api, conversation).status_code == 404
    assert Message.objects.count() == 0


def test_a_malformed_conversation_id_is_a_404(api):
    assert api.get("/conversations/nope", user_id="alice").status_code == 404


def test_too_many_messages_is_a_413(api, settings):
    settings.MEMORYHUB_MAX_CAPTURE_MESSAGES = 1
    response = add(api, start(api))
    assert (response.status_code, response.json()["error"]["code"]) == (413, "too_many_messages")


def fail_on(table):
    def wrapper(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{table}"'):
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    return wrapper


# The 503 handler closes the broken connection, so these need their own transactions.
@pytest.mark.django_db(transaction=True)
def test_when_the_database_fails_mid_request_it_is_a_503_and_nothing_is_stored(api):
    conversation = start(api)
    with connection.execute_wrapper(fail_on("memories_message")):
        response = add(api, conversation)
    assert (response.status_code, response.json()["error"]["code"]) == (503, "database_unavailable")
    assert Message.objects.count() == 0
    assert redis_client().exists(session_key(conversation)) == 0


@pytest.mark.django_db(transaction=True)
def test_a_capture_whose_job_cannot_be_stored_keeps_none_of_its_messages(api):
    conversation = start(api)
    body = {"user_id": "alice", "trigger": "turn", "messages": TURN, "conversation_id": conversation}
    with connection.execute_wrapper(fail_on("capture_capturejob")):
        response = api.post("/capture", body)
    assert response.status_code == 503
    assert Message.objects.count() == 0


def test_user_and_assistant_messages_get_embedded_and_tool_messages_do_not(api):
    conversation = start(api)
    add(api, conversation, [*TURN, {"role": "tool", "content": "exit 0"}])
    waiting = messages_awaiting_embedding(older_than=timezone.now() + timedelta(seconds=1), limit=100)
    assert len(waiting) == 2
    assert embed_messages(message_ids=waiting) == 2
    embedded = Message.objects.exclude(embedding_model="").order_by("seq")
    assert [(m.seq, m.embedding_model, len(m.embedding)) for m in embedded] == [
        (1, "all-MiniLM-L6-v2", 384),
        (2, "all-MiniLM-L6-v2", 384),
    ]
    assert messages_awaiting_embedding(older_than=timezone.now() + timedelta(seconds=1), limit=100) == []

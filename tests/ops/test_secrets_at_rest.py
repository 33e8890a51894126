"""No secret is stored at any boundary (docs/adr/0015-secrets-redacted-at-every-boundary.md)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from capture.models import CaptureJob
from common.redaction import REDACTED, find_secrets, iban_valid, luhn_valid, redact

CARD = "4111 1111 1111 1111"
TOKEN = "ghp_R7kQ2mXv9LpT4sWc8NbY3hJd6FgA1zE5uK0o"
IBAN = "DE89 3704 0044 0532 0130 00"
SSN = "123-45-6789"
SECRETS = (CARD, TOKEN, IBAN, SSN, "4111111111111111")


def stored_text() -> str:
    """Every user-content table, as text: what a database dump would hold."""
    tables = [
        "memories_memory",
        "memories_memoryrevision",
        "memories_message",
        "memories_conversation",
        "memories_scratchpadentry",
        "capture_capturejob",
    ]
    with connection.cursor() as cursor:
        dumps = []
        for table in tables:
            cursor.execute(f"SELECT coalesce(json_agg(t)::text, '') FROM {table} t")  # noqa: S608
            dumps.append(cursor.fetchone()[0])
    return "\n".join(dumps)


def assert_nothing_stored() -> None:
    text = stored_text()
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], leaked


@pytest.mark.parametrize(
    ("text", "kind"),
    [(f"card {CARD} ok", "payment_card"), (f"pay to {IBAN}.", "iban"), (f"SSN {SSN}", "ssn")],
)
def test_checked_numbers_are_found(text, kind):
    assert [m.kind for m in find_secrets(text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112",  # fails Luhn
        "order 1234567890123",
        "SSN 666-12-3456",  # never issued
        "IBAN DE89 3704 0044 0532 0130 01",  # fails mod 97
        "on 2024-05-06 at 10:15, version 1.2.3, phone 555-123-4567",
    ],
)
def test_numbers_that_fail_their_check_are_not_secrets(text):
    assert find_secrets(text) == []


def test_check_digit_helpers():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")


def test_redaction_keeps_the_full_stop_that_ends_the_sentence():
    assert redact(f"My token is {TOKEN}. I work at Acme.")[0] == f"My token is {REDACTED}. I work at Acme."


def test_direct_writes_store_the_fact_without_the_secret(api, make_memory):
    created = make_memory(content=f"Alice pays rent with card {CARD} on the 1st.", metadata={"note": f"iban {IBAN}"})
    assert created["content"] == f"Alice pays rent with card {REDACTED} on the 1st."
    assert created["metadata"] == {"note": f"iban {REDACTED}"}
    bulk = api.post("/memories/bulk", {"memories": [{"user_id": "alice", "content": f"Alice's SSN is {SSN}, ok."}]})
    assert bulk.status_code == 201
    patch = api.patch(
        f"/memories/{created['id']}",
        {
            "user_id": "alice",
            "content": f"Alice deploys the billing service every night with the token {TOKEN} from the vault.",
        },
    )
    assert patch.status_code == 200 and TOKEN not in patch.json()["content"]
    successor = api.post(
        f"/memories/{created['id']}/supersede", {"user_id": "alice", "content": f"Alice now pays with {CARD}."}
    )
    assert successor.status_code == 201 and REDACTED in successor.json()["content"]
    tool = api.post("/tools/add_memory", {"user_id": "alice", "content": f"Alice's backup card is {CARD}."})
    assert tool.status_code == 201 and REDACTED in tool.json()["content"]
    assert_nothing_stored()


def test_a_write_that_is_only_a_secret_is_refused_and_nothing_is_stored(api):
    response = api.post("/memories", {"user_id": "alice", "content": TOKEN})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "secret_content"
    assert_nothing_stored()


def test_conversation_messages_are_stored_and_returned_redacted(api):
    conversation = api.post("/conversations", {"user_id": "alice"}).json()["id"]
    said = [{"role": "user", "content": f"my card is {CARD}, remember I like tea", "meta": {"iban": IBAN}}]
    assert (
        api.post(f"/conversations/{conversation}/messages", {"user_id": "alice", "messages": said}).status_code == 201
    )
    shown = json.dumps(api.get(f"/conversations/{conversation}", user_id="alice").json())
    assert CARD not in shown and IBAN not in shown and "remember I like tea" in shown
    assert_nothing_stored()


def test_capture_windows_and_observation_payloads_are_stored_redacted(api):
    turn = {"user_id": "alice", "trigger": "turn", "messages": [{"role": "user", "content": f"My SSN is {SSN}."}]}
    assert api.post("/capture", turn).status_code == 202
    observation = {"user_id": "alice", "step_name": "billing", "output": f"Charged card {CARD} successfully. " * 3}
    assert api.post("/observations", observation).status_code == 202
    assert CaptureJob.objects.count() == 2
    assert_nothing_stored()


def test_scratchpad_values_are_stored_redacted(api):
    response = api.put("/scratchpad/payment", {"user_id": "alice", "value": {"card": CARD, "nested": [TOKEN]}})
    assert response.status_code == 200, response.content
    assert_nothing_stored()


def test_the_migrations_redact_what_was_stored_before(api, make_memory):
    from importlib import import_module

    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    from conversations.models import Message
    from memories.models import Memory

    memory = make_memory(content="Alice keeps bees.")
    Memory.objects.filter(pk=memory["id"]).update(content=f"Alice keeps bees; her card is {CARD}.")
    conversation = api.post("/conversations", {"user_id": "alice"}).json()["id"]
    said = [{"role": "user", "content": "hello"}]
    api.post(f"/conversations/{conversation}/messages", {"user_id": "alice", "messages": said})
    Message.objects.filter(conversation_id=conversation).update(content=f"my IBAN is {IBAN}")
    turn = {"user_id": "alice", "trigger": "turn", "messages": [{"role": "user", "content": "hi"}]}
    api.post("/capture", turn)
    CaptureJob.objects.update(window=[{"role": "user", "content": f"SSN {SSN}"}])
    assert any(s in stored_text() for s in SECRETS)

    # Each with the models as they were when it ran (Message lived in ``memories`` then).
    for app, name in (("memories", "0007_redact_stored_secrets"), ("capture", "0003_redact_stored_secrets")):
        then = MigrationLoader(connection).project_state((app, name)).apps
        import_module(f"{app}.migrations.{name}").forward(then, None)

    assert_nothing_stored()
    assert Memory.objects.get(pk=memory["id"]).embedding_status == "pending"

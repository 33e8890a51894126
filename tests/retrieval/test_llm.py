from __future__ import annotations

from typing import Any

import pytest

from retrieval.llm import LLMError, complete
from tests.support import openai_fixtures
from tests.support.openai_server import FakeOpenAI, Fault

fake_openai = openai_fixtures.fake_openai  # also in tests/conftest.py; here so these run alone

MESSAGES = [
    {"role": "system", "content": "You classify memories."},
    {"role": "user", "content": "I always use tabs."},
]


def ask(server: FakeOpenAI, *, timeout: float = 5.0) -> str:
    return complete(MESSAGES, model="fake-chat", timeout=timeout, base_url=server.base_url, api_key="test-key")


def test_complete_returns_the_scripted_reply(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat('{"memories": []}')

    assert ask(fake_openai) == '{"memories": []}'


def test_complete_sends_the_messages_model_and_limits(fake_openai: FakeOpenAI) -> None:
    complete(MESSAGES, model="fake-chat", timeout=5, max_tokens=77, temperature=0.3, base_url=fake_openai.base_url)

    [(path, body)] = fake_openai.calls
    assert path == "/v1/chat/completions"
    assert body["messages"] == MESSAGES
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("fake-chat", 77, 0.3)


def test_complete_uses_the_default_reply_once_the_script_runs_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat("scripted")
    fake_openai.default_chat = "default"

    assert [ask(fake_openai), ask(fake_openai)] == ["scripted", "default"]


def test_a_server_error_is_an_llm_error_and_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat(Fault(status=500))

    with pytest.raises(LLMError, match="HTTP 500"):
        ask(fake_openai)
    assert fake_openai.count("/chat/completions") == 1


def test_a_slow_server_is_an_llm_error_after_the_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat(Fault(delay=3.0))

    with pytest.raises(LLMError, match="timed out after 0.2s"):
        ask(fake_openai, timeout=0.2)


@pytest.mark.parametrize(
    "reply",
    [Fault(empty=True), "", "   ", Fault(body="not json"), Fault(body='{"choices": "nope"}')],
    ids=["no-choices", "empty-content", "blank-content", "not-json", "malformed"],
)
def test_a_reply_without_text_is_an_llm_error(fake_openai: FakeOpenAI, reply: str | Fault) -> None:
    fake_openai.script_chat(reply)

    with pytest.raises(LLMError):
        ask(fake_openai)


def test_a_wrong_api_key_is_an_llm_error() -> None:
    with FakeOpenAI(api_key="right") as server, pytest.raises(LLMError, match="HTTP 401"):
        complete(MESSAGES, model="fake-chat", timeout=5, base_url=server.base_url, api_key="wrong")


# --- structured output: the response_format each kind of server takes ---------------------

SCHEMA = {"type": "object", "properties": {"memories": {"type": "array"}}, "required": ["memories"]}


def ask_with_schema(server: FakeOpenAI) -> str:
    return complete(MESSAGES, model="fake-chat", timeout=5, base_url=server.base_url, json_schema=SCHEMA)


def sent_formats(server: FakeOpenAI) -> list[Any]:
    return [body.get("response_format") for path, body in server.calls if path.endswith("/chat/completions")]


def test_a_schema_goes_as_openai_json_schema_first(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat('{"memories": []}')

    assert complete(MESSAGES, timeout=5, base_url=fake_openai.base_url, json_schema=SCHEMA, schema_name="mem") == (
        '{"memories": []}'
    )
    assert sent_formats(fake_openai) == [
        {"type": "json_schema", "json_schema": {"name": "mem", "schema": SCHEMA, "strict": False}}
    ]


def test_no_schema_sends_no_response_format(fake_openai: FakeOpenAI) -> None:
    ask(fake_openai)

    assert sent_formats(fake_openai) == [None]


def test_a_llama_cpp_style_server_gets_json_object_with_the_schema_and_it_is_remembered() -> None:
    with FakeOpenAI(response_formats=("text", "json_object")) as server:
        server.script_chat('{"memories": [1]}', '{"memories": [2]}')

        assert [ask_with_schema(server), ask_with_schema(server)] == ['{"memories": [1]}', '{"memories": [2]}']

        json_schema = {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA, "strict": False}}
        json_object = {"type": "json_object", "schema": SCHEMA}
        assert sent_formats(server) == [json_schema, json_object, json_object]


def test_a_server_that_takes_no_response_format_is_asked_without_one() -> None:
    with FakeOpenAI(response_formats=("text",)) as server:
        server.script_chat("free text [] reply")

        assert ask_with_schema(server) == "free text [] reply"
        assert [f and f["type"] for f in sent_formats(server)] == ["json_schema", "json_object", None]


def test_an_error_that_does_not_name_the_format_is_not_a_reason_to_try_another(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat(Fault(status=500))

    with pytest.raises(LLMError, match="HTTP 500"):
        ask_with_schema(fake_openai)
    assert fake_openai.count("/chat/completions") == 1

from __future__ import annotations

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

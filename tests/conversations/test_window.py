from __future__ import annotations

from typing import Any

import pytest

from conversations.window import clean_window, render_window


def test_clean_window_keeps_only_user_and_assistant_text() -> None:
    messages = [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "user", "content": "Hello"},
        {"role": "developer", "content": "Be brief."},
        {"role": "assistant", "content": "Hi!"},
    ]

    assert clean_window(messages) == [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]


def test_clean_window_drops_tool_messages_and_tool_call_payloads() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Read the config"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "DEBUG=true"},
        {"role": "function", "name": "read", "content": "DEBUG=true"},
        {"role": "assistant", "content": "Debug is on.", "tool_calls": [{"id": "c2", "type": "function"}]},
    ]

    assert clean_window(messages) == [
        {"role": "user", "content": "Read the config"},
        {"role": "assistant", "content": "Debug is on."},
    ]


def test_clean_window_keeps_only_the_text_parts_of_list_content() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "3 matches"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "input_text", "text": "Now fix them."},
                "and add a test",
            ],
        },
    ]

    assert clean_window(messages) == [
        {"role": "assistant", "content": "Let me check."},
        {"role": "user", "content": "Now fix them.\nand add a test"},
    ]


def test_clean_window_cuts_inline_tool_markup_out_of_the_text() -> None:
    messages = [
        {"role": "assistant", "content": 'Checking.<tool_call>{"name": "ls"}</tool_call> Found two files.'},
        {"role": "assistant", "content": "Running it now <function_calls><invoke name='run'>"},
        {"role": "user", "content": "<tool_result>exit 0</tool_result>"},
    ]

    assert clean_window(messages) == [
        {"role": "assistant", "content": "Checking. Found two files."},
        {"role": "assistant", "content": "Running it now"},
    ]


def test_clean_window_starts_after_the_last_summary_marker() -> None:
    messages = [
        {"role": "user", "content": "old question"},
        {"role": "system", "content": "[Summary] The user set up the project."},
        {"role": "user", "content": "middle question"},
        {"role": "assistant", "content": "Summary of the conversation so far: tests were added."},
        {"role": "user", "content": "new question"},
        {"role": "assistant", "content": "new answer"},
    ]

    assert clean_window(messages) == [
        {"role": "user", "content": "new question"},
        {"role": "assistant", "content": "new answer"},
    ]


def test_a_user_message_starting_with_summary_is_not_a_summary_marker() -> None:
    messages = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "[summary] please write one"},
    ]

    assert clean_window(messages) == [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "[summary] please write one"},
    ]


def test_clean_window_drops_empty_and_malformed_messages_and_maps_role_aliases() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "   "},
        {"role": "human", "content": " What time is it? "},
        "not a message",
        {"content": "no role"},
        {"role": "ai", "content": "Noon."},
        {"role": "assistant", "content": 42},
    ]

    assert clean_window(messages) == [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": "Noon."},
    ]


def test_max_chars_keeps_the_newest_messages_and_cuts_the_oldest_kept_one_at_its_start() -> None:
    messages = [
        {"role": "user", "content": "a" * 50},
        {"role": "assistant", "content": "The older answer is here."},
        {"role": "user", "content": "newest"},
    ]

    window = clean_window(messages, max_chars=30)

    assert window == [
        {"role": "assistant", "content": "…older answer is here."},
        {"role": "user", "content": "newest"},
    ]
    assert sum(len(m["content"]) for m in window) <= 30


def test_max_chars_leaves_out_a_fragment_too_short_to_mean_anything() -> None:
    messages = [{"role": "user", "content": "an older message"}, {"role": "user", "content": "x" * 95}]

    assert clean_window(messages, max_chars=100) == [{"role": "user", "content": "x" * 95}]


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        clean_window([], max_chars=0)


def test_render_window_labels_each_message_with_its_speaker() -> None:
    window = [
        {"role": "user", "content": "I prefer tabs."},
        {"role": "assistant", "content": "Noted.\nI will use tabs."},
    ]

    assert render_window(window) == "User: I prefer tabs.\nAssistant: Noted.\nI will use tabs."

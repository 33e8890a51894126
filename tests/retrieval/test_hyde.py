"""HyDE prompt building and tolerant parsing of the model's hypotheses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.hyde import MAX_HYPOTHESIS_CHARS, PROMPT_PATH, build_hyde_messages, parse_hypotheses

WINDOW = "user: What package manager should I use for my new Python project?\nassistant: Either works."


def test_build_hyde_messages_sends_the_prompt_file_as_system_and_the_window_as_user() -> None:
    system, user = build_hyde_messages(WINDOW, n=3)
    assert system["role"] == "system"
    assert system["content"] == PROMPT_PATH.read_text(encoding="utf-8").strip().replace("{n}", "3")
    assert user == {
        "role": "user",
        "content": f"Conversation (the latest message is last):\n\n```text\n{WINDOW}\n```\n\nWrite 3 sentences.",
    }


def test_hyde_prompt_asks_for_third_person_statements_and_no_questions() -> None:
    system = build_hyde_messages(WINDOW, n=4)[0]["content"]
    assert "write exactly 4 different sentences" in system
    assert "The user prefers uv over pip" in system
    assert "Never write questions" in system
    assert "{n}" not in system


def test_build_hyde_messages_keeps_the_end_of_a_long_window() -> None:
    window = "user: I used to write Perl. " * 500 + "user: Which test runner should I pick?"
    content = build_hyde_messages(window, n=2, max_window_tokens=12)[1]["content"]
    assert "Which test runner should I pick?" in content
    assert content.count("Perl") <= 2


def test_build_hyde_messages_fences_a_window_that_contains_backticks() -> None:
    content = build_hyde_messages("user: see ```code``` and ````more````", n=1)[1]["content"]
    assert "`````text\nuser: see ```code``` and ````more````\n`````" in content


def test_build_hyde_messages_rejects_a_blank_window_and_a_non_positive_n() -> None:
    with pytest.raises(ValueError, match="blank"):
        build_hyde_messages("  \n ", n=3)
    with pytest.raises(ValueError, match="at least 1"):
        build_hyde_messages(WINDOW, n=0)


def test_parse_hypotheses_reads_one_sentence_per_line() -> None:
    reply = "The user prefers uv over pip.\n\nThe team uses Poetry.\n"
    assert parse_hypotheses(reply, n=5) == ["The user prefers uv over pip.", "The team uses Poetry."]


def test_parse_hypotheses_strips_numbering_in_every_common_style() -> None:
    reply = "1. The user likes tea.\n2) The user likes coffee.\n(3) The user likes water.\n[4] The user likes milk."
    assert parse_hypotheses(reply, n=4) == [
        "The user likes tea.",
        "The user likes coffee.",
        "The user likes water.",
        "The user likes milk.",
    ]


def test_parse_hypotheses_strips_bullets_labels_bold_and_quotes() -> None:
    reply = '- "The user likes tea."\n* Hypothesis 2: The user likes coffee.\n• **H3:** “The user likes water.”'
    assert parse_hypotheses(reply, n=3) == ["The user likes tea.", "The user likes coffee.", "The user likes water."]


def test_parse_hypotheses_keeps_numbers_that_are_part_of_the_sentence() -> None:
    reply = "3.5 million users rely on the service.\n10:30 is the user's daily standup time."
    assert parse_hypotheses(reply, n=2) == [
        "3.5 million users rely on the service.",
        "10:30 is the user's daily standup time.",
    ]


def test_parse_hypotheses_reads_a_json_array_in_a_code_fence_after_a_preamble() -> None:
    reply = 'Here are the hypotheses:\n```json\n["The user likes tea.", "The user says \\"hi\\"."]\n```'
    assert parse_hypotheses(reply, n=3) == ["The user likes tea.", 'The user says "hi".']


def test_parse_hypotheses_reads_a_json_object_and_a_json_array_cut_off_mid_way() -> None:
    assert parse_hypotheses('{"hypotheses": ["The user likes tea."]}', n=3) == ["The user likes tea."]
    assert parse_hypotheses('["The user likes tea.", "The user likes cof', n=3) == ["The user likes tea."]


def test_parse_hypotheses_drops_preambles_and_keeps_at_most_n_distinct_sentences() -> None:
    reply = (
        "Sure! Here are 4 sentences:\nThe user likes tea.\nthe user likes tea\nThe user likes jam.\nThe user likes ham."
    )
    assert parse_hypotheses(reply, n=2) == ["The user likes tea.", "The user likes jam."]


def test_parse_hypotheses_splits_a_paragraph_into_sentences() -> None:
    reply = "The user likes tea. The user drinks 3.5 litres a day. Dr. Lee is the user's doctor."
    assert parse_hypotheses(reply, n=5) == [
        "The user likes tea.",
        "The user drinks 3.5 litres a day.",
        "Dr. Lee is the user's doctor.",
    ]


def test_parse_hypotheses_cuts_a_long_sentence_at_a_word_boundary() -> None:
    words = "likes very long sentences "
    # Character 300 ends a "likes"; in the second reply it falls inside "likes".
    assert parse_hypotheses("The user " + words * 30, n=1) == ["The user " + words * 11 + "likes"]
    assert parse_hypotheses("The user " + "x" + words * 30, n=1) == [
        "The user x" + words * 10 + "likes very long sentences"
    ]


@pytest.mark.parametrize("reply", ["", "   \n\n", "```\n```", "[]", "{}", "[1, 2, 3]", "---\n***\n...", "[" * 5000])
def test_parse_hypotheses_returns_nothing_for_empty_or_garbage_replies(reply: str) -> None:
    assert parse_hypotheses(reply, n=3) == []


def test_parse_hypotheses_survives_bad_escapes_and_lone_surrogates_in_json() -> None:
    assert parse_hypotheses('["The user likes \\x tea.", "The user likes jam.\\ud800", "The user', n=3) == [
        "The user likes \\x tea.",
        "The user likes jam.",
    ]


def test_parse_hypotheses_with_n_zero_returns_nothing() -> None:
    assert parse_hypotheses("The user likes tea.", n=0) == []


json_like = st.lists(st.sampled_from(['"', "[", "]", "{", "}", ":", ",", "\\", "\\u", "d800", "x", " ", "\n", "1."]))


@given(st.text() | json_like.map("".join), st.integers(min_value=0, max_value=8))
@settings(max_examples=300, deadline=None)
def test_parse_hypotheses_always_returns_at_most_n_short_distinct_sentences(reply: str, n: int) -> None:
    parsed = parse_hypotheses(reply, n=n)
    assert len(parsed) <= n
    assert all(0 < len(sentence) <= MAX_HYPOTHESIS_CHARS for sentence in parsed)
    assert all(sentence == " ".join(sentence.split()) for sentence in parsed)
    assert all(sentence.encode("utf-8") for sentence in parsed)
    assert len({" ".join(s.casefold().split()).rstrip(".!;") for s in parsed}) == len(parsed)

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capture.classifier import ClassifierOutputError
from capture.observations import (
    build_observation_messages,
    extract_observations,
    parse_observation_output,
    prepare_step_output,
)
from capture.proposals import ProposedMemory

LOAD_TEST_OUTPUT = """## Findings
- The payments API rate limit is 100 requests per minute.
- Auth uses OAuth2 client credentials.

I ran the integration suite against staging. It returned HTTP 503 for 12 of 40 requests after the rollout.
The 503s are likely caused by the connection pool being capped at 10 because the config still has the old default.
Next time, check the pool size before load testing. Avoid running the suite during deploys.
Lesson: always pin the API version header.
Here is the summary of what I did.

```
Traceback: ConnectionError because pool exhausted
```
"""


def _summary(proposals: list[ProposedMemory]) -> list[tuple[str, str]]:
    return [(p.category, p.content) for p in proposals]


def test_findings_insights_and_lessons_are_told_apart() -> None:
    proposals = extract_observations(step_name="load-test", step_type="GOAL", output=LOAD_TEST_OUTPUT)

    assert _summary(proposals) == [
        ("finding", "The payments API rate limit is 100 requests per minute."),
        ("finding", "Auth uses OAuth2 client credentials."),
        ("finding", 'During the GOAL step "load-test", it returned HTTP 503 for 12 of 40 requests after the rollout.'),
        (
            "insight",
            "The 503s are likely caused by the connection pool being capped at 10 because the config still has "
            "the old default.",
        ),
        ("lesson", "Next time, check the pool size before load testing."),
        ("lesson", "Avoid running the suite during deploys."),
        ("lesson", "Always pin the API version header."),
    ]


def test_every_observation_is_a_user_scoped_note_with_its_source() -> None:
    proposals = extract_observations(step_name="load-test", step_type="GOAL", output=LOAD_TEST_OUTPUT)

    assert {(p.kind, p.scope) for p in proposals} == {("note", "user")}
    assert proposals[0] == ProposedMemory(
        content="The payments API rate limit is 100 requests per minute.",
        kind="note",
        category="finding",
        scope="user",
        importance=0.5,
        confidence=0.8,
        reason='Finding from the GOAL step "load-test".',
        evidence="The payments API rate limit is 100 requests per minute.",
    )
    assert proposals[2].confidence == 0.7  # classified by wording, not labelled by a heading


def test_an_output_under_fifty_characters_yields_nothing() -> None:
    assert extract_observations(step_name="s", step_type="RUN", output="  Found 3 errors; it failed.   ") == []


def test_only_the_first_four_thousand_characters_are_read() -> None:
    filler = "The export job took 2 seconds for 1000 rows. " * 90
    output = filler + "Next time, always stream the rows instead of buffering them."

    proposals = extract_observations(step_name="export", step_type="AGENT", output=output)

    assert len(filler) > 4000
    assert [p.category for p in proposals] == ["finding"]


def test_prepare_step_output_cuts_at_a_sentence_end_or_else_a_word_boundary() -> None:
    sentences = prepare_step_output("The job took 2 seconds. " * 200)
    words = prepare_step_output("word " * 1000)

    assert sentences is not None and len(sentences) <= 4000 and sentences.endswith("seconds.")
    assert words is not None and len(words) <= 4000 and words.endswith(" word")
    assert prepare_step_output("too short") is None


def test_narration_and_plain_prose_are_not_observations() -> None:
    output = "I will now look at the logs. Let me check the config. This step summary follows. Everything went well."

    assert extract_observations(step_name="s", step_type="RUN", output=output) == []


def test_secrets_in_step_output_are_redacted_or_dropped() -> None:
    output = (
        "The deploy script uses DATABASE_URL=postgres://app:s3cret@db.internal/app at start-up.\n"
        "The admin password is hunter2.\n"
    )

    proposals = extract_observations(step_name="deploy", step_type="GOAL", output=output)

    assert _summary(proposals) == [
        ("finding", "The deploy script uses DATABASE_URL=postgres://app:[REDACTED]@db.internal/app at start-up.")
    ]
    assert "s3cret" not in proposals[0].evidence


def test_at_most_twelve_observations_are_kept_and_repeats_only_once() -> None:
    lines = [f"- Endpoint /v{i} returns HTTP 200 in 30 ms." for i in range(20)]
    output = "Findings:\n" + "\n".join(["- Endpoint /v0 returns HTTP 200 in 30 ms.", *lines])

    proposals = extract_observations(step_name="probe", step_type="RUN", output=output)

    assert [p.content for p in proposals] == [f"Endpoint /v{i} returns HTTP 200 in 30 ms." for i in range(12)]


def test_the_llm_messages_fence_and_redact_the_step_output() -> None:
    output = "Found the token ghp_" + "a1B2c3D4e5" * 4 + " in </step_output> the CI logs, which should never happen."

    system, user = build_observation_messages("scan-logs", "GOAL", output)

    assert system["role"] == "system"
    assert '{"findings": ["..."], "insights": ["..."], "lessons": ["..."]}' in system["content"]
    assert user["content"] == (
        "STEP: GOAL 'scan-logs'\n\n<step_output>\nFound the token [REDACTED] in &lt;/step_output&gt; the CI logs, "
        "which should never happen.\n</step_output>\n\nAnswer with the JSON object only."
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"findings": ["The API limit is 100/min."], "insights": [], "lessons": ["Check limits first."]}',
        'Sure!\n```json\n{"Findings": ["The API limit is 100/min."], "lessons learned": ["Check limits first.",],}'
        "\n```",
        '{"observation": {"finding": "The API limit is 100/min.", "lesson": [{"content": "Check limits first."}]}}',
        '[{"category": "finding", "content": "The API limit is 100/min."}, {"type": "lessons", "text": "Check '
        'limits first."}]',
        '{"findings": ["The API limit is 100/min."], "lessons": ["Check limits first."], "insights": ["REST is sim',
    ],
)
def test_the_llm_answer_is_parsed_in_any_reasonable_shape(text: str) -> None:
    proposals = parse_observation_output(text, step_name="api-scan", step_type="GOAL")

    assert _summary(proposals) == [("finding", "The API limit is 100/min."), ("lesson", "Check limits first.")]
    assert proposals[0].reason == 'Finding from the GOAL step "api-scan".'


def test_empty_lists_mean_nothing_to_remember() -> None:
    assert parse_observation_output('{"findings": [], "insights": [], "lessons": []}') == []


@pytest.mark.parametrize("text", ["no JSON at all", '{"summary": "done"}', '["a", "b"]'])
def test_an_unusable_llm_answer_raises(text: str) -> None:
    with pytest.raises(ClassifierOutputError):
        parse_observation_output(text)


@given(st.text(max_size=600))
def test_the_rule_path_never_fails_on_any_output(output: str) -> None:
    for memory in extract_observations(step_name="s", step_type="RUN", output=output):
        assert memory.category in {"finding", "insight", "lesson"}


@given(st.text(max_size=300))
def test_the_llm_parser_raises_nothing_but_classifier_output_error(text: str) -> None:
    try:
        proposals = parse_observation_output(text)
    except ClassifierOutputError:
        return
    assert all(memory.category in {"finding", "insight", "lesson"} for memory in proposals)

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capture.changes import Known
from capture.proposals import ProposedMemory
from capture.rules import extract_from_window
from common.redaction import find_secrets
from conversations.window import clean_window

CODING_SESSION = [
    {"role": "user", "content": "Hey! I'm Priya, and I'm a backend engineer at Northwind."},
    {"role": "assistant", "content": "Nice to meet you, Priya! What are we working on today?"},
    {
        "role": "user",
        "content": "We're adding a CSV export to the billing service. Can you look at the invoices module first?",
    },
    {
        "role": "assistant",
        "content": "Let me open it.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "billing/invoices.py"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "def build_rows(invoices):\n    # we decided to use lists here\n"
        "    return [row(i) for i in invoices]",
    },
    {
        "role": "assistant",
        "content": "The invoices module builds every row in `build_rows()`. A generator would let large exports "
        "stream. Should I use `csv.DictWriter`?",
    },
    {"role": "user", "content": "Yes, use DictWriter. btw I prefer generators over building big lists in Python."},
    {
        "role": "assistant",
        "content": "Got it. We decided to use DictWriter, so here is a first version with a generator.",
    },
    {
        "role": "user",
        "content": "Looks good. In this repo we always put type hints on public functions, and we use ruff for "
        "formatting.",
    },
    {"role": "assistant", "content": "Added type hints. Should the export live in `billing/exports/`?"},
    {"role": "user", "content": "No, exports go in `billing/reports/`, not `billing/exports/`."},
    {"role": "assistant", "content": "Moved it. Do you want me to add tests?"},
    {
        "role": "user",
        "content": "Yes please. Please don't use mocks for the database in tests, we run them against a real Postgres.",
    },
    {"role": "assistant", "content": "Understood: the tests now use the real database fixture."},
    {"role": "user", "content": "I'm not sure we decided on the file encoding yet, maybe UTF-8 with BOM for Excel?"},
    {"role": "assistant", "content": "Excel opens UTF-8 with a BOM most reliably. Want me to add it?"},
    {"role": "user", "content": "Let's go with UTF-8 with BOM for all CSV exports."},
    {"role": "assistant", "content": "Done. Anything else?"},
    {"role": "user", "content": "Remember that the billing service deploys only on Tuesdays and Thursdays."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Also, my timezone is CET, so schedule the nightly export for 2am my time."},
    {"role": "assistant", "content": "Scheduled for 02:00 CET."},
    {
        "role": "user",
        "content": "We decided to keep exports synchronous for files under 10 MB because Celery adds latency.",
    },
    {"role": "assistant", "content": "Makes sense; I kept the small-file path synchronous."},
    {
        "role": "user",
        "content": "Oh, and my GitHub token is ghp_0123456789abcdefghijABCDEFGHIJ0123456789, don't save it anywhere.",
    },
    {"role": "assistant", "content": "I won't store it."},
    {"role": "user", "content": "Thanks, that's perfect!"},
]


def _summary(proposals: list[ProposedMemory]) -> list[tuple[str, str, str, str]]:
    return [(p.content, p.kind, p.category, p.scope) for p in proposals]


def _user(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text} for text in texts]


def test_a_realistic_coding_session_yields_exactly_the_durable_memories() -> None:
    memories = extract_from_window(clean_window(CODING_SESSION))

    assert _summary(memories) == [
        ("The user's name is Priya.", "fact", "user-facts", "user"),
        ("The user is a backend engineer at Northwind.", "fact", "user-facts", "user"),
        ("The user prefers generators over building big lists in Python.", "preference", "coding-preferences", "user"),
        (
            "In this repo, the team always puts type hints on public functions.",
            "fact",
            "project-conventions",
            "project",
        ),
        ("In this repo, the team uses ruff for formatting.", "fact", "project-conventions", "project"),
        ("Exports go in `billing/reports/`, not `billing/exports/`.", "fact", "corrections", "user"),
        (
            "The user does not want the assistant to use mocks for the database in tests.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "The team decided to go with UTF-8 with BOM for all CSV exports.",
            "decision",
            "architectural-decisions",
            "project",
        ),
        ("The billing service deploys only on Tuesdays and Thursdays.", "fact", "project-conventions", "project"),
        ("The user's timezone is CET.", "fact", "user-facts", "user"),
        (
            "The team decided to keep exports synchronous for files under 10 MB because Celery adds latency.",
            "decision",
            "architectural-decisions",
            "project",
        ),
    ]


def test_each_memory_keeps_the_users_sentence_as_evidence_and_a_reason() -> None:
    memories = extract_from_window(clean_window(CODING_SESSION))

    remembered = next(m for m in memories if m.content.startswith("The billing service"))
    assert remembered.evidence == "Remember that the billing service deploys only on Tuesdays and Thursdays."
    assert remembered.reason == "The user asked for this to be remembered."
    assert (remembered.importance, remembered.confidence) == (0.8, 0.9)


def test_chit_chat_yields_nothing() -> None:
    chat = [
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello! How can I help today?"},
        {"role": "user", "content": "Just wanted to say thanks for yesterday, that worked great."},
        {"role": "assistant", "content": "Glad it helped! We decided to celebrate, I hope."},
        {"role": "user", "content": "I like it a lot. Have a nice weekend!"},
        {"role": "assistant", "content": "You too!"},
        {"role": "user", "content": "Haha, I'm a bit tired today."},
        {"role": "user", "content": "Maybe we could try that new cafe sometime?"},
        {"role": "user", "content": "Ok cool, sounds good. Never mind, don't worry about it."},
    ]

    assert extract_from_window(chat) == []


def test_assistant_messages_are_never_mined() -> None:
    window = [{"role": "assistant", "content": "I prefer tabs. We decided to use Kafka. Remember that X is Y."}]

    assert extract_from_window(window) == []


@pytest.mark.parametrize(
    "text",
    [
        "Should we use PostgreSQL for the event store?",
        "can you remember that I prefer tabs",
        "If I preferred spaces, would that break the linter?",
        "I'm not sure we decided on Kafka.",
        "Maybe we'll use Redis for caching.",
        "I think we should use pnpm.",
        "We haven't decided on the queue yet.",
        "We'll use SQLite for now.",
        "Let's use a dict here.",
        "Let's go with your suggestion.",
        "I like that.",
        "Remember that my password is hunter2.",
        "My API key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z, please use it.",
        "I prefer",
        "No, it's fine.",
        "Don't save it anywhere.",
        "Let's use a dict instead of a list.",
    ],
)
def test_questions_hypotheticals_doubts_vague_or_secret_statements_are_skipped(text: str) -> None:
    assert extract_from_window(_user(text)) == []


@pytest.mark.parametrize(
    ("text", "content", "kind", "category", "scope"),
    [
        (
            "I'd rather use pathlib than os.path.",
            "The user would rather use pathlib than os.path.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "I hate magic numbers in code.",
            "The user hates magic numbers in code.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "Always use f-strings, please.",
            "The user wants the assistant to always use f-strings.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "please don't touch the migrations folder",
            "The user does not want the assistant to touch the migrations folder.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "we chose Kafka over RabbitMQ for the audit log",
            "The team chose Kafka over RabbitMQ for the audit log.",
            "decision",
            "architectural-decisions",
            "project",
        ),
        (
            "We'll use Redis for the rate limiter.",
            "The team will use Redis for the rate limiter.",
            "decision",
            "architectural-decisions",
            "project",
        ),
        (
            "Our convention is that every endpoint returns JSON errors.",
            "The team's convention is that every endpoint returns JSON errors.",
            "fact",
            "project-conventions",
            "project",
        ),
        (
            "The team uses trunk-based development.",
            "The team uses trunk-based development.",
            "fact",
            "project-conventions",
            "project",
        ),
        (
            "Correction: the API base path is /api/v2.",
            "The API base path is /api/v2.",
            "fact",
            "corrections",
            "project",
        ),
        (
            "That's wrong. We deploy with Helm, not Kustomize.",
            "The team deploys with Helm, not Kustomize.",
            "fact",
            "corrections",
            "project",
        ),
        (
            "I meant the staging cluster, not prod.",
            "The user meant the staging cluster, not prod.",
            "fact",
            "corrections",
            "user",
        ),
        ("I live in Lisbon.", "The user lives in Lisbon.", "fact", "user-facts", "user"),
        ("I'm on macOS with zsh.", "The user is on macOS with zsh.", "fact", "user-facts", "user"),
        ("My preferred editor is Neovim.", "The user's preferred editor is Neovim.", "fact", "user-facts", "user"),
        ("Call me Sam.", "The user wants to be called Sam.", "fact", "user-facts", "user"),
        (
            "Note that the CI runs on Python 3.11.",
            "The CI runs on Python 3.11.",
            "fact",
            "project-conventions",
            "project",
        ),
        (
            "It's important that our migrations stay reversible.",
            "The team's migrations stay reversible.",
            "fact",
            "project-conventions",
            "project",
        ),
        (
            "The conclusion is that we shard by tenant.",
            "The team shards by tenant.",
            "decision",
            "architectural-decisions",
            "project",
        ),
        (
            "Key insight: retries without jitter overload the queue.",
            "Retries without jitter overload the queue.",
            "note",
            "patterns",
            "user",
        ),
        (
            "I learned that the ORM silently truncates long strings.",
            "The user learned that the ORM silently truncates long strings.",
            "note",
            "lesson",
            "user",
        ),
        (
            "From now on, run ruff before every commit.",
            "The user wants the assistant to run ruff before every commit.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "Remember to rebase onto main before opening a PR.",
            "The user wants the assistant to rebase onto main before opening a PR.",
            "preference",
            "coding-preferences",
            "user",
        ),
        (
            "In our monorepo, tests sit next to the code they test.",
            "In the team's monorepo, tests sit next to the code they test.",
            "fact",
            "project-conventions",
            "project",
        ),
        (
            "Sorry, I was wrong earlier: we use Python 3.12, not 3.11.",
            "The team uses Python 3.12, not 3.11.",
            "fact",
            "corrections",
            "project",
        ),
        (
            "It's important to run the migrations before the tests.",
            "The user wants the assistant to run the migrations before the tests.",
            "preference",
            "coding-preferences",
            "user",
        ),
    ],
)
def test_each_kind_of_statement_becomes_a_clean_third_person_memory(
    text: str, content: str, kind: str, category: str, scope: str
) -> None:
    assert _summary(extract_from_window(_user(text))) == [(content, kind, category, scope)]


def test_fillers_are_stripped_and_clauses_split_into_separate_memories() -> None:
    window = _user("um ok so btw my name is dana and I work as a data engineer; I love Rust, thanks!")

    assert [p.content for p in extract_from_window(window)] == [
        "The user's name is Dana.",
        "The user works as a data engineer.",
        "The user loves Rust.",
    ]


def test_the_same_statement_made_twice_is_kept_once() -> None:
    window = _user("I prefer tabs in Python.", "As I said: I prefer tabs in Python!", "i prefer tabs in python")

    assert [p.content for p in extract_from_window(window)] == ["The user prefers tabs in Python."]


def test_pasted_code_and_quoted_text_are_not_mined() -> None:
    window = _user("Look at this:\n```python\n# we decided to use globals\n```\n> I prefer spaces\nThanks.")

    assert extract_from_window(window) == []


_words = st.sampled_from(
    [
        "I",
        "we",
        "prefer",
        "always",
        "never",
        "use",
        "decided",
        "to",
        "remember",
        "that",
        "actually,",
        "no,",
        "my",
        "name",
        "is",
        "in",
        "this",
        "repo",
        "the",
        "team",
        "Python",
        "tabs",
        ".",
        "?",
        "please",
        "don't",
        "let's",
        "go",
        "with",
        "Postgres",
        "and",
        ",",
        "\n",
        "it",
        "from now on",
        "key insight:",
        "password:",
        "hunter2",
    ]
)


@given(st.lists(_words, max_size=30).map(" ".join) | st.text(max_size=200))
def test_the_extractor_never_fails_and_only_returns_clean_sentences(text: str) -> None:
    for memory in extract_from_window(_user(text)):
        assert memory.content[0].isupper() or not memory.content[0].isalpha()
        assert memory.content.endswith(".")
        assert find_secrets(memory.content) == [] and "[REDACTED]" not in memory.content


# --- changes of mind, polarity, multi-clause turns, personal facts -----------------------------


def _known(*contents: str) -> list[Known]:
    return [Known(f"m{i}", content, "preference", "coding-preferences") for i, content in enumerate(contents, 1)]


def _one(text: str, existing: list[Known] | None = None) -> tuple[str, str | None]:
    [memory] = extract_from_window(_user(text), existing=existing or [])
    return memory.content, memory.supersedes


def test_switching_from_one_tool_to_another_rewrites_and_supersedes_the_memory_naming_it() -> None:
    existing = _known("The user prefers tabs for indentation.", "The user uses black for formatting the user's code.")

    memory = extract_from_window(
        _user("Actually I switched from black to ruff format last week, it's much faster."), existing=existing
    )

    assert [(m.content, m.supersedes, m.kind, m.category) for m in memory] == [
        ("The user uses ruff format for formatting the user's code.", "m2", "preference", "coding-preferences")
    ]


def test_a_switch_with_no_memory_to_replace_is_written_as_a_plain_statement() -> None:
    assert _one("I switched from black to ruff format last week.") == (
        "The user switched from black to ruff format.",
        None,
    )


@pytest.mark.parametrize(
    ("text", "existing", "content", "supersedes"),
    [
        (
            "I no longer drink green tea, I've switched to coffee in the mornings.",
            ["The user drinks green tea every morning.", "The user prefers tabs."],
            "The user no longer drinks green tea; the user has switched to coffee in the mornings.",
            "m1",
        ),
        (
            "I'm not on the night shift anymore.",
            ["The user likes hiking.", "The user works on the night shift."],
            "The user is no longer on the night shift.",
            "m2",
        ),
        ("I use pnpm instead of npm now.", ["The user uses npm for JavaScript packages."], None, "m1"),
        (
            "From now on I want tabs for indentation in Python.",
            ["The user prefers spaces for indentation in Python.", "The user writes Python."],
            "The user wants tabs for indentation in Python.",
            "m1",
        ),
        (
            "Sorry, I was wrong earlier, it's amoxicillin I'm allergic to, not penicillin.",
            ["The user is allergic to penicillin."],
            "The user is allergic to amoxicillin.",
            "m1",
        ),
        ("Standup moved to 10:15 from next week.", ["The team's daily standup is at 9:30."], None, "m1"),
        ("Actually, I moved to Munich last month.", ["The user lives in Berlin."], "The user lives in Munich.", "m1"),
        ("My timezone is CET now.", ["The user's timezone is PST."], "The user's timezone is CET.", "m1"),
        (
            "Scratch that, I've gone back to Emacs.",
            ["The user likes hiking.", "The user edits code in Vim."],
            "The user edits code in Emacs.",
            "m2",
        ),
        ("We now deploy on Fridays.", ["The user likes hiking.", "The team deploys on Thursdays."], None, "m2"),
        (
            "I stopped using Docker Desktop, it was too slow.",
            ["The user runs Docker Desktop on a Mac."],
            "The user stopped using Docker Desktop.",
            "m1",
        ),
        (
            "I've gone back to tabs.",
            ["The user likes hiking.", "The user indents Python with spaces."],
            "The user indents Python with tabs.",
            "m2",
        ),
    ],
)
def test_a_change_of_mind_supersedes_the_matching_memory(
    text: str, existing: list[str], content: str | None, supersedes: str
) -> None:
    new_content, new_supersedes = _one(text, _known(*existing))

    assert new_supersedes == supersedes
    if content is not None:
        assert new_content == content


@pytest.mark.parametrize(
    ("text", "existing"),
    [
        # No change of mind: an unrelated preference stays.
        ("I prefer Postgres over MySQL for new projects.", ["The user prefers tabs for indentation."]),
        # A change, but two memories fit it equally well: unsure, so no supersede.
        ("I no longer use black.", ["The user uses black for Python.", "The user uses black for notebooks."]),
        # A value of the same kind, but about something else and without any sign of a change.
        ("We deploy on Wednesdays.", ["The user goes to the gym on Mondays."]),
    ],
)
def test_no_supersede_when_nothing_clearly_matches(text: str, existing: list[str]) -> None:
    assert _one(text, _known(*existing))[1] is None


def test_an_elliptical_correction_with_nothing_to_correct_writes_nothing() -> None:
    assert extract_from_window(_user("No, it's John with an h, not Jon.")) == []


def test_the_nearest_memory_by_meaning_is_the_last_resort_for_named_old_words() -> None:
    existing = _known("The user commutes by car.", "The user works at Initech.")
    asked: list[str] = []

    def nearest(text: str) -> str | None:
        asked.append(text)
        return "m1"

    [memory] = extract_from_window(_user("I don't drive to work anymore, I cycle."), existing=existing, nearest=nearest)

    assert (memory.content, memory.supersedes) == ("The user no longer drives to work; the user cycles.", "m1")
    assert asked == ["The user drives to work."]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("We decided to deploy on Fridays never again.", "The team decided never to deploy on Fridays again."),
        ("We never force-push to main.", "The team never force-pushes to main."),
        ("I never eat pork.", "The user never eats pork."),
        (
            "Our Go services log JSON to stdout and never to files.",
            "The team's Go services log JSON to stdout and never to files.",
        ),
        ("We decided not to use microservices.", "The team decided not to use microservices."),
    ],
)
def test_negations_keep_their_polarity(text: str, content: str) -> None:
    assert [m.content for m in extract_from_window(_user(text))] == [content]


def test_a_multi_clause_turn_keeps_the_clause_that_states_the_rule() -> None:
    memories = extract_from_window(
        _user("We decided to deploy on Fridays never again; releases go out Tuesday mornings.")
    )

    assert _summary(memories) == [
        ("The team decided never to deploy on Fridays again.", "decision", "architectural-decisions", "project"),
        ("Releases go out Tuesday mornings.", "decision", "architectural-decisions", "project"),
    ]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        (
            "I'm lactose intolerant, so keep that in mind for recipes.",
            "The user is lactose intolerant, so the user can't eat most dairy.",
        ),
        ("I'm severely allergic to shellfish.", "The user is severely allergic to shellfish."),
        ("I have type 1 diabetes, so meal plans need carb counts.", "The user has type 1 diabetes."),
        ("I'm gluten-free because of coeliac disease.", "The user is gluten-free because of coeliac disease."),
        (
            "I take my blood pressure medication every morning at 8.",
            "The user takes the user's blood pressure medication every morning at 8.",
        ),
        ("My wife is called Sofia.", "The user's wife is called Sofia."),
        (
            "My mom has lived with us since last spring.",
            "The user's mom has lived with the user's family since last spring.",
        ),
        ("I live in Rotterdam with my partner.", "The user lives in Rotterdam with the user's partner."),
        ("I work from home on Tuesdays and Thursdays.", "The user works from home on Tuesdays and Thursdays."),
        (
            "I have a standing 1:1 with my manager every Monday at 10.",
            "The user has a standing 1:1 with the user's manager every Monday at 10.",
        ),
        ("My quarterly tax filing is due on April 30.", "The user's quarterly tax filing is due on April 30."),
    ],
)
def test_health_diet_family_place_and_schedule_facts_are_recognised(text: str, content: str) -> None:
    memories = extract_from_window(_user(text))

    assert [(m.content, m.kind, m.category, m.scope) for m in memories] == [(content, "fact", "user-facts", "user")]


def test_a_secret_drops_only_its_own_sentence() -> None:
    window = _user("I'm lactose intolerant. My AWS key is AKIA4MEMHUBX7Q2RZP5T by the way. I live in Oslo.")

    assert [m.content for m in extract_from_window(window)] == [
        "The user is lactose intolerant, so the user can't eat most dairy.",
        "The user lives in Oslo.",
    ]


@pytest.mark.parametrize("text", ["My AWS key is AKIA… by the way.", "The deploy token is abc123-masked."])
def test_a_labelled_credential_is_never_stored_even_cut_or_masked(text: str) -> None:
    assert extract_from_window(_user(text)) == []


_change_words = st.sampled_from(
    [
        "I",
        "we",
        "switched",
        "from",
        "to",
        "no longer",
        "anymore",
        "actually,",
        "now",
        "it's",
        "not",
        "moved",
        "black",
        "ruff",
        "tabs",
        "spaces",
        "Berlin",
        "9:30",
        "instead of",
        "don't",
        "use",
        ",",
        ".",
    ]
)
_EXISTING = _known("The user uses black for Python.", "The user lives in Berlin.", "The team's standup is at 9:30.")


@given(st.lists(_change_words, max_size=20).map(" ".join))
def test_a_change_of_mind_only_ever_supersedes_one_of_the_users_memories_once(text: str) -> None:
    memories = extract_from_window(_user(text), existing=_EXISTING)

    replaced = [m.supersedes for m in memories if m.supersedes]
    assert set(replaced) <= {k.id for k in _EXISTING} and len(replaced) == len(set(replaced))
    for memory in memories:
        assert memory.content.endswith(".") and memory.content != "-."


def _said(text: str, timestamp: str = "2026-03-09T10:00:00") -> list[dict[str, str]]:
    return [{"role": "user", "content": text, "timestamp": timestamp}]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("we have a newborn, our son Arjun was born in may", "The user's son Arjun was born in May 2025."),
        ("we finally bought a car", "The user's family finally bought a car."),
        (
            "we adopted a greyhound on saturday, her name is Pixel",
            "The user's family adopted a greyhound on 2026-03-07",
        ),
    ],
)
def test_we_and_our_in_a_household_are_the_users_family_not_the_team(text: str, content: str) -> None:
    found = extract_from_window(_said(text))
    assert any(m.content.startswith(content) for m in found), found
    assert all("team" not in m.content and m.scope == "user" for m in found)


def test_we_at_work_is_still_the_team() -> None:
    [memory] = extract_from_window(_said("we deploy on fridays"))
    assert (memory.content, memory.scope) == ("The team deploys on fridays.", "project")


@pytest.mark.parametrize(
    ("text", "content", "event_date"),
    [
        ("Yesterday I started a new job at Acme.", "on 2026-03-08", "2026-03-08"),
        (
            "I have to be careful since my doctor confirmed I have celiac disease last month",
            "in February 2026",
            "2026-02",
        ),
        ("yesterday we had dinner with my parents", "on 2026-03-08", "2026-03-08"),
        ("i've gone vegan since the start of this month", "since the start of March 2026", "2026-03"),
        ("i started physio this week", "in the week of 2026-03-09", "2026-03-09"),
    ],
)
def test_relative_dates_are_resolved_against_the_message_time(text: str, content: str, event_date: str) -> None:
    [memory] = extract_from_window(_said(text))
    assert content in memory.content and memory.event_date == event_date
    assert "yesterday" not in memory.content.lower() and "last month" not in memory.content


def test_a_message_without_a_time_is_dated_by_the_capture_day() -> None:
    from datetime import date

    [memory] = extract_from_window(_user("Yesterday I started a new job at Acme."), today=date(2026, 1, 1))
    assert "on 2025-12-31" in memory.content


@pytest.mark.parametrize(
    "text",
    [
        "Also, for the team lunch planner: I'm allergic to peanuts.",
        "For the team offsite, I'm vegetarian.",
        "In this repo, I have asthma so no late deploys for me.",
    ],
)
def test_a_personal_fact_is_never_project_scope(text: str) -> None:
    found = extract_from_window(_user(text))
    assert found and all(m.scope == "user" and m.category == "user-facts" for m in found), found


@pytest.mark.parametrize(
    ("text", "existing", "content"),
    [
        (
            "we had to drop launchdarkly, too expensive. using unleash self hosted now",
            "The team uses launchdarkly for flags.",
            "The team uses unleash for flags.",
        ),
        (
            "right so tomas started eating fish again so he's pescatarian now, not vegetarian",
            "The user's husband tomas is vegetarian.",
            "The user's husband tomas is pescatarian.",
        ),
        (
            "update: ditched proxmox, just running everything in docker on plain debian now",
            "The user runs proxmox on the home server.",
            "The user runs docker on the home server.",
        ),
    ],
)
def test_a_change_of_circumstance_said_in_passing_supersedes_the_memory_it_replaces(
    text: str, existing: str, content: str
) -> None:
    found = extract_from_window(_user(text), existing=[Known("m1", existing, "fact", "user-facts", "user")])
    assert [(m.content, m.supersedes) for m in found if m.supersedes] == [(content, "m1")]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("duolingo 40 day streak lol. my dad's name is salvo btw", "The user's dad's name is salvo."),
        ("nice, 5 people, my manager is called efua", "The user's manager is called efua."),
        ("observability for ml pipelines. my colleague june co-presented", "The user's colleague june co-presented."),
        ("i've gone vegan since the start of march", "The user has gone vegan since the start of march."),
        ("i get terrible motion sickness on planes", "The user gets terrible motion sickness on planes."),
        ("yes, i'm lifting weights 4x a week", "The user is lifting weights 4x a week."),
        ("also started therapy, once a week on tuesdays", "The user started therapy, once a week on tuesdays."),
        ("i got the job!!! starting at monzo next month", "The user is starting at monzo in April 2026."),
        ("mom's blood sugar is way better too", "The user's mom's blood sugar is way better too."),
    ],
)
def test_facts_said_in_passing_in_lowercase_chat_are_kept(text: str, content: str) -> None:
    found = [m.content for m in extract_from_window(_said(text))]
    assert content in found, found


@pytest.mark.parametrize("text", ["i'm starting to think this is wrong", "i'm getting tired of this", "i'm going home"])
def test_a_passing_state_said_with_ing_is_not_kept(text: str) -> None:
    assert extract_from_window(_said(text)) == []


def test_a_month_said_of_what_is_scheduled_is_the_coming_one() -> None:
    [memory] = extract_from_window(_said("my twins start nursery in april, eva and finn"))
    assert "April 2026" in memory.content and memory.event_date == "2026-04"
    [memory] = extract_from_window(_said("our son Arjun was born in april"))
    assert "April 2025" in memory.content


def test_she_and_he_name_the_one_spoken_of_earlier_in_the_window() -> None:
    window = _said("doing way better. started yoga too, my sister got me into it") + _said(
        "she's a yoga teacher in brighton lol, her name's katya"
    )
    found = [m.content for m in extract_from_window(window)]
    assert "The user's sister is called Katya." in found
    assert "The user's sister is a yoga teacher in brighton." in found
    [dad] = extract_from_window(_said("a trip to sicily with my dad in june. he's from palermo originally"))
    assert dad.content == "The user's dad is from palermo originally."


def test_someone_close_named_in_passing_is_remembered_by_name() -> None:
    found = [m.content for m in extract_from_window(_said("ugh my sister nora is visiting this weekend, pizza again"))]
    assert "The user's sister is called Nora." in found
    found = [m.content for m in extract_from_window(_said("lol my dog rocco ate a sock, the vet bill was 800 quid"))]
    assert "The user's dog is called Rocco." in found
    # Kept beside the remark that mentions them: the remark is no standing fact.
    found = [m.content for m in extract_from_window(_said("my girlfriend ruth thinks i'm turning into an old man"))]
    assert "The user's girlfriend is called Ruth." in found
    # A verb or an adverb after the relation is no name.
    for text in ("my sister got married last year", "my brother just moved to leeds", "my son loves football"):
        assert not any("called" in m.content for m in extract_from_window(_said(text))), text


def test_she_never_names_a_husband_nor_he_a_sister() -> None:
    window = _said("my husband omar is painting the nursery") + _said("she's a natural at it")
    assert not any("husband is a natural" in m.content for m in extract_from_window(window))
    window = _said("my sister nora is visiting") + _said("he's from leeds originally")
    assert not any("sister is from" in m.content for m in extract_from_window(window))


def test_it_names_the_animal_or_place_spoken_of_never_a_person() -> None:
    window = _said("i'm interviewing at a startup next week") + _said("got the offer!! it's called tidewise")
    assert "The user's startup is called Tidewise." in [m.content for m in extract_from_window(window)]
    window = _said("my sister nora is visiting") + _said("it's called tidewise")
    assert not any("called Tidewise" in m.content for m in extract_from_window(window))


def test_her_and_him_after_a_verb_name_the_one_spoken_of() -> None:
    found = [
        m.content
        for m in extract_from_window(_said("my mom got diagnosed with diabetes. i'm cooking for her on sundays"))
    ]
    assert "The user is cooking for the user's mom on sundays." in found
    # Nobody spoken of: the pronoun stays.
    [alone] = extract_from_window(_said("i'm cooking for her on sundays now"))
    assert "for her" in alone.content


@pytest.mark.parametrize(
    ("text", "content"),
    [
        # News openers are filler, as "ok so" is.
        (
            "bad news, dad broke his ankle so sicily is postponed",
            "The user's dad broke his ankle so sicily is postponed.",
        ),
        # Chat drops the article before "team".
        ("at work we're moving off jenkins, team voted for github actions", "The team voted for github actions."),
        # An aside after "the team" does not hide its practice.
        ("the team (6 of us) does pair programming every afternoon", "pair programming every afternoon"),
    ],
)
def test_standing_facts_said_in_chat(text: str, content: str) -> None:
    found = [m.content for m in extract_from_window(_said(text))]
    assert any(content in memory for memory in found), found


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("i'm type 1 diabetic so i watch carbs", "The user is type 1 diabetic so the user watches carbs."),
        ("i went vegan in march", "The user went vegan in March 2026."),
        ("i can't do dairy at all", "The user can't do dairy at all."),
        ("been off gluten for a year now", "The user has been off gluten for a year."),
        ("shellfish makes me really sick", "Shellfish makes the user really sick."),
        ("my nut allergy is pretty bad", "The user's nut allergy is pretty bad."),
        ("doc says my blood pressure is too high", "The user's blood pressure is too high."),
        ("i'm on a low sodium diet", "The user is on a low sodium diet."),
        ("no red meat for me, just chicken and fish", "The user has no red meat, just chicken and fish."),
        ("quit smoking in june", "The user quit smoking in June 2025."),
        ("i'm between jobs", "The user is between jobs."),
    ],
)
def test_diet_and_health_said_the_way_people_say_them_are_kept(text: str, content: str) -> None:
    assert [m.content for m in extract_from_window(_said(text))] == [content]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("i teach year 5 at a primary school in leeds", "The user teaches year 5 at a primary school in leeds."),
        ("i run a small bakery in porto", "The user runs a small bakery in porto."),
        ("i do marketing for a bike company", "The user does marketing for a bike company."),
        ("i do plumbing for a living", "The user does plumbing for a living."),
        ("i've been a nurse for 12 years", "The user has been a nurse for 12 years."),
    ],
)
def test_work_said_as_what_the_user_does_is_kept(text: str, content: str) -> None:
    assert [(m.content, m.category) for m in extract_from_window(_said(text))] == [(content, "user-facts")]


@pytest.mark.parametrize(
    "text",
    [
        "i've been a bit of a mess for weeks",
        "i can't do this anymore",
        "quit it, you're making this harder",
    ],
)
def test_look_alikes_of_diet_and_work_facts_are_not_kept(text: str) -> None:
    assert extract_from_window(_said(text)) == []


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("for context im the mobile lead, our team is 4 devs", "The user is the mobile lead."),
        ("help me budget? i freelance as an illustrator, so money swings", "The user freelances as an illustrator."),
        ("any tips? i bake bread at a tiny bakery in leeds", "The user bakes bread at a tiny bakery in leeds."),
        (
            "ive gone fully vegetarian since the start of this month",
            "The user has gone fully vegetarian since the start of March 2026.",
        ),
        ("i cant eat gluten", "The user can't eat gluten."),
    ],
)
def test_work_and_diet_typed_without_apostrophes_or_inside_a_request_are_kept(text: str, content: str) -> None:
    found = [m.content for m in extract_from_window(_said(text))]
    assert content in found, found


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("lol pepper (my cat) sat on my laptop again", "The user's cat is called Pepper."),
        ("me n my gf lena want a cheap weekend away", "The user's girlfriend is called Lena."),
        ("my bf theo is weirdly into trains", "The user's boyfriend is called Theo."),
        ("my partner jo built the shed herself", "The user's partner is called Jo."),
    ],
)
def test_someone_close_named_in_brackets_or_by_a_short_word_is_remembered(text: str, content: str) -> None:
    assert content in [m.content for m in extract_from_window(_said(text))]


@pytest.mark.parametrize(
    "text",
    [
        "i had lunch at a cafe near the office",
        "i met sam at a bar in york",
        "i'm the worst cook ever",
        "this week has been rough",
    ],
)
def test_a_visit_a_boast_or_a_mood_is_not_work(text: str) -> None:
    assert extract_from_window(_said(text)) == []


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("can you suggest dinners for the week, i'm vegetarian", "The user is vegetarian."),
        ("how do i ask for a raise, i've been a nurse for 6 years", "The user has been a nurse for 6 years."),
        (
            "what snacks can i keep at my desk, has to be safe bc my peanut allergy is the anaphylaxis kind",
            "The user's peanut allergy is the anaphylaxis kind.",
        ),
    ],
)
def test_a_question_that_goes_on_to_say_something_of_the_user_keeps_that(text: str, content: str) -> None:
    assert [m.content for m in extract_from_window(_said(text))] == [content]


@pytest.mark.parametrize(
    "text", ["can you check this, i think it's broken", "what do you think, i prefer tabs?", "why is it slow, i wonder"]
)
def test_a_question_with_a_doubt_or_a_question_after_the_comma_stays_out(text: str) -> None:
    assert extract_from_window(_said(text)) == []

"""evaluation/data/pipeline/natural*.jsonl keep the promises of evaluation/data/pipeline/README.md.

A question whose evidence does not state its answer would score the pipeline against a fact
nobody said; an "unanswerable" question with an answer would reward returning noise.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from typing import Any

import pytest

from conversations.dates import MONTHS, WEEKDAYS
from evaluation.natural import NATURAL_MORE_PATH, NATURAL_PATH, SPLITS, alias_in, any_alias_in, load_natural

QUESTION_TYPES = ("single", "multi", "temporal", "change", "unanswerable")
_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5}

# Each file with the fewest people it promises.
SETS = {"natural": (NATURAL_PATH, 40), "natural_more": (NATURAL_MORE_PATH, 18)}
LOADED = {name: load_natural(path) for name, (path, _) in SETS.items()}
PEOPLE = [person for people in LOADED.values() for person in people]
QUESTIONS = [(person, q) for person in PEOPLE for q in person["questions"]]


# How the set's temporal questions were labelled (evaluation/data/pipeline/README.md).
def resolve_relative(phrase: str, day: dt.date) -> str:
    """``phrase`` ("yesterday", "on saturday", "last month"…) said on ``day``, as ISO (day or month)."""
    said = phrase.lower().strip()
    if said in ("today", "this morning", "tonight", "earlier today"):
        return day.isoformat()
    if said == "yesterday":
        return (day - dt.timedelta(days=1)).isoformat()
    if said == "tomorrow":
        return (day + dt.timedelta(days=1)).isoformat()
    if match := re.fullmatch(r"(\w+) days ago", said):
        count = int(match.group(1)) if match.group(1).isdigit() else _NUMBERS[match.group(1)]
        return (day - dt.timedelta(days=count)).isoformat()
    if said == "last week":
        return (day - dt.timedelta(days=7)).isoformat()
    if said == "last month":
        return (day.replace(day=1) - dt.timedelta(days=1)).strftime("%Y-%m")
    if said == "next month":
        return (day.replace(day=28) + dt.timedelta(days=5)).strftime("%Y-%m")
    for index, name in enumerate(WEEKDAYS):
        if said in (name, f"on {name}", f"last {name}", f"this past {name}"):
            back = (day.weekday() - index - 1) % 7 + 1  # strictly before the day it was said
            return (day - dt.timedelta(days=back)).isoformat()
        if said in (f"next {name}", f"this coming {name}", f"coming {name}"):
            ahead = (index - day.weekday() - 1) % 7 + 1
            return (day + dt.timedelta(days=ahead)).isoformat()
    raise ValueError(f"no rule for the relative date {phrase!r}")


def date_forms(iso: str) -> list[str]:
    """How a resolved date may be written in a memory: ISO, "march 7", "7 march", "mar 7"."""
    if len(iso) == 7:
        year, month = iso.split("-")
        return [iso, f"{MONTHS[int(month) - 1]} {year}"]
    day = dt.date.fromisoformat(iso)
    name = MONTHS[day.month - 1]
    return [iso, f"{name} {day.day}", f"{day.day} {name}", f"{name[:3]} {day.day}"]


def _message(person: dict[str, Any], pair: list[int]) -> Any:
    session, index = pair
    return person["sessions"][session]["messages"][index]


@pytest.mark.parametrize("name", SETS)
def test_size_and_shape(name: str) -> None:
    people = LOADED[name]
    assert len(people) >= SETS[name][1]
    # Ids are unique across both files, so their figures can be pooled.
    assert len({p["person"] for p in PEOPLE}) == len(PEOPLE)
    assert len({q["id"] for _, q in QUESTIONS}) == len(QUESTIONS)
    for person in people:
        assert person["split"] in SPLITS, person["person"]
        assert len(person["sessions"]) >= 3, person["person"]
        assert 4 <= len(person["questions"]) <= 8, person["person"]
        dates = [dt.date.fromisoformat(s["date"]) for s in person["sessions"]]
        assert dates == sorted(dates), f"{person['person']}: sessions out of date order"
        for session in person["sessions"]:
            roles = [m["role"] for m in session["messages"]]
            assert set(roles) == {"user", "assistant"}, person["person"]
            assert all(m["content"].strip() for m in session["messages"])


@pytest.mark.parametrize("name", SETS)
def test_about_a_third_is_held_out(name: str) -> None:
    people = LOADED[name]
    held = sum(p["split"] == "heldout" for p in people)
    assert 0.25 <= held / len(people) <= 0.40
    # Both splits must be able to report every kind of question on their own.
    for split in SPLITS:
        kinds = {q["type"] for p in people if p["split"] == split for q in p["questions"]}
        assert {"single", "temporal", "change", "unanswerable"} <= kinds, split


@pytest.mark.parametrize("name", SETS)
def test_unanswerable_share_and_shape(name: str) -> None:
    questions = [q for p in LOADED[name] for q in p["questions"]]
    counts = Counter(q["type"] for q in questions)
    assert set(counts) <= set(QUESTION_TYPES)
    assert counts["unanswerable"] / len(questions) >= 0.20
    for q in questions:
        if q["type"] == "unanswerable":
            assert q["answers"] == [] and q["evidence"] == [], q["id"]
        else:
            assert q["answers"] and q["evidence"], q["id"]


@pytest.mark.parametrize(("person", "question"), QUESTIONS, ids=[q["id"] for _, q in QUESTIONS])
def test_evidence_states_the_answer(person: dict[str, Any], question: dict[str, Any]) -> None:
    for pair in question["evidence"]:
        session, index = pair
        assert 0 <= session < len(person["sessions"]), pair
        assert 0 <= index < len(person["sessions"][session]["messages"]), pair
        assert _message(person, pair)["role"] == "user", f"{question['id']}: evidence {pair} is not the user's"
    texts = [_message(person, pair)["content"] for pair in question["evidence"]]
    if question["type"] == "temporal":
        # Checked on the resolved form: the phrase was said, and the label is its resolution.
        phrase = question["relative"]
        assert any(phrase in text.lower() for text in texts), f"{question['id']}: {phrase!r} not in evidence"
        said_on = dt.date.fromisoformat(person["sessions"][question["evidence"][0][0]]["date"])
        assert question["date"] == resolve_relative(phrase, said_on), question["id"]
        assert question["date"] in question["answers"]
        assert set(date_forms(question["date"])) <= set(question["answers"])
    elif question["type"] != "unanswerable":
        assert any(any_alias_in(question["answers"], text) for text in texts), (
            f"{question['id']}: no answer alias in its evidence {texts}"
        )
    if question["type"] == "change":
        said = [m["content"] for s in person["sessions"] for m in s["messages"] if m["role"] == "user"]
        assert question["stale"] and any(any_alias_in(question["stale"], text) for text in said), question["id"]


def test_alias_match_is_anchored_at_a_word_start() -> None:
    assert alias_in("july 6", "i go back to work on July 6th")
    assert alias_in("sunday", "cooking for her on sundays now")
    assert not alias_in("sam", "my friend jessamy")
    assert not alias_in("lab", "we collaborate")


def test_relative_dates_resolve_against_the_day_they_were_said() -> None:
    monday = dt.date(2026, 3, 9)
    assert resolve_relative("yesterday", monday) == "2026-03-08"
    assert resolve_relative("on saturday", monday) == "2026-03-07"
    assert resolve_relative("on monday", monday) == "2026-03-02"  # a past weekday is never the same day
    assert resolve_relative("next monday", monday) == "2026-03-16"
    assert resolve_relative("last month", monday) == "2026-02"
    assert date_forms("2026-03-07") == ["2026-03-07", "march 7", "7 march", "mar 7"]

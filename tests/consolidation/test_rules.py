"""The rules a consolidation judges pairs with (consolidation/rules.py and reader.py), on the issue's examples
and the hard cases the labelled set is built around. Pure text: no servers, no embedder (the
cosine is given as the local model measures such pairs)."""

from __future__ import annotations

import pytest

from consolidation import reader, rules


def judge(older: str, newer: str, cosine: float) -> rules.Verdict:
    return rules.judge(reader.read(older), reader.read(newer), cosine)


def test_black_then_ruff_is_a_supersede_of_the_older_by_the_newer():
    verdict = judge("Uses black to format Python.", "Formats Python with ruff now.", 0.58)
    assert verdict.action == "supersede" and verdict.confidence >= 0.8
    assert "black" in verdict.reason and "ruff" in verdict.reason


def test_the_same_fact_in_other_words_is_a_merge():
    assert judge("Prefers dark mode in every editor.", "Likes dark themes in all editors.", 0.74).action == "merge"
    assert judge("The user has a dog named Pixel.", "The user's dog is called Pixel.", 0.95).action == "merge"


@pytest.mark.parametrize(
    ("older", "newer", "cosine"),
    [
        ("Has a sister named Ana.", "Has a sister named Lia.", 0.68),
        ("Likes tea.", "Likes green tea in the morning.", 0.78),
        ("Likes tea.", "Likes green tea.", 0.82),
        ("The user plays guitar.", "The user's son plays guitar.", 0.84),
        ("The user's brother lives in Berlin.", "The user's sister lives in Berlin.", 0.86),
        ("The user prefers dark mode.", "The user prefers dark mode in the terminal.", 0.87),
        (
            "The user is reading about caching for the data team.",
            "The user is reading about caching for the infra team.",
            0.88,
        ),
        ("The user takes a swim on Monday mornings.", "The user takes a swim on Monday evenings.", 0.95),
        ("The user runs 5 km every morning.", "The user runs 10 km every morning.", 0.93),
        ("The user deploys the frontend on Vercel.", "The user deploys the backend on Fly.io.", 0.69),
    ],
)
def test_distinct_facts_however_close_are_both_kept(older, newer, cosine):
    assert judge(older, newer, cosine).action == "keep"


def test_a_change_needs_a_single_valued_slot_or_a_word_saying_it_changed():
    assert judge("The user drinks coffee.", "The user drinks tea.", 0.75).action == "keep"
    assert judge("The user lives in Lisbon.", "The user moved to Berlin last month.", 0.46).action == "supersede"
    assert judge("The user's timezone is UTC.", "The user's timezone is CET.", 0.85).action == "supersede"
    # Two sons are two sons; a partner is one at a time.
    assert judge("The user has a son named Tom.", "The user has a son named Ben.", 0.71).action == "keep"
    assert judge("The user's partner is called Sam.", "The user's partner is Alex now.", 0.65).action == "supersede"


def test_a_statement_reversed_with_a_change_word_supersedes_it_and_without_one_is_kept():
    assert judge("The user drinks coffee every morning.", "The user no longer drinks coffee.", 0.7).action == (
        "supersede"
    )
    assert judge("The user eats meat.", "The user doesn't eat meat.", 0.87).action == "keep"


def test_the_value_a_newer_statement_moves_away_from_is_read_as_the_old_one():
    verdict = judge("The user uses npm.", "The user switched from npm to pnpm.", 0.72)
    assert verdict.action == "supersede" and verdict.confidence >= 0.9
    # "spaces over tabs" is another preference than "tabs over spaces", not the same words.
    assert judge("Prefers tabs over spaces.", "Prefers spaces over tabs.", 0.98).action == "supersede"


def test_nothing_is_judged_below_the_candidate_cosine():
    assert (
        judge("The user lives in Lisbon.", "The user lives in Lisbon.", rules.CANDIDATE_MIN_COSINE - 0.01) == rules.KEEP
    )


def test_a_reading_names_its_slot_value_and_subject():
    reading = reader.read("The user's mother lives in Madrid.")
    assert (reading.subject, reading.slot, reading.slot_value) == ("mother", "location", "madrid")
    assert reader.read("I switched from black to ruff format").values == {"formatter": frozenset({"ruff"})}
    assert reader.read("The user's laptop is now a MacBook Air.").slot_value == "macbook air"

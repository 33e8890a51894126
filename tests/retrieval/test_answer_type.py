"""Answer-type filtering: a question asking for an age, an amount, a job or someone by their
relation to the user is answered only by items that can hold one.

The unit half needs no server; the end-to-end half sends conversations through POST /capture
(rules, no LLM) and asks POST /retrieve, with real Postgres, Redis and the local embedder.
"""

from __future__ import annotations

import pytest

from retrieval.ranking.answer_type import Expectation, expected, holds
from tests.retrieval.test_episodes import ask, capture, texts


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("how old is tess?", "age"),
        ("what's my salary?", "money"),
        ("how much did the renovation cost?", "money"),
        ("what does rocco weigh?", "weight"),
        ("what's my best 10k time?", "duration"),
        ("how many days a week do i work?", None),
        ("when is the baby due?", None),
        ("how big was my raise?", "money"),
        ("what did the charity race raise awareness for?", None),
        ("what's my partner's job?", "job"),
        ("what does my sister do?", "job"),
        ("what's my flat number?", "number"),
        ("what language does my new job use?", None),
        ("how much coffee do i drink?", None),
        ("what's my dog called?", "name"),
        ("what's the name of our wedding venue?", "name"),
        ("what's that app called that i use for budgeting?", None),
        ("what's my protein target?", "number"),
        ("how far do i cycle to work?", "number"),
        ("what's my goal?", None),
    ],
)
def test_the_answer_type_a_question_asks_for(question: str, kind: str | None) -> None:
    assert expected(question).kind == kind


def test_a_turn_that_asks_nothing_expects_nothing() -> None:
    assert not expected("my salary went up today!")
    assert not expected("ugh my sister is visiting this weekend")


@pytest.mark.parametrize(
    ("question", "text", "answers"),
    [
        ("how old is tess?", "tess hurt her paw on thursday (2026-03-12), vet says rest for 2 weeks", False),
        ("how old is tess?", "tess is a 4 yr old collie", True),
        ("how old is ama turning?", "ama turns 7 on june 14", True),
        ("how much did the renovation cost?", "we're renovating the bathroom, contractor starts (2026-02-17)", False),
        ("how much did the interrail pass cost?", "cost 430 with the youth discount", True),
        ("what's my salary?", "senior data engineer. leaving deliveroo after 4 yrs", False),
        ("what's my salary?", "they offered me £62k", True),
        ("what's my flat number?", "The user lives in a 3rd floor flat in lyon.", False),
        ("what's my partner's job?", "The user's partner jess.", False),
        ("what's my partner's job?", "my partner jess works as a nurse at st thomas'", True),
        ("what do i do for a living", "how do i get off on-call? i do sre for a living at brightfreight", True),
        ("what do i do for work", "i do 3d modelling at a tiny indie game studio and my laptop is loud", True),
        ("what does sam do for work", "we dropped the barn, going with a hotel in harrogate instead", False),
        ("do i have high cholesterol?", "The user's blood pressure is a bit high, 145 over 90.", False),
        ("do i have any allergies?", "The user is allergic to penicillin.", True),
        ("what's my protein target?", "yes, i'm lifting weights 4x a week", False),
        ("what's my protein target?", "aiming for 140g protein a day", True),
    ],
)
def test_what_can_hold_the_answer(question: str, text: str, answers: bool) -> None:
    assert holds(expected(question), text, message=False) is answers


def test_a_memory_must_name_the_asked_relation_and_a_message_must_not_name_another() -> None:
    mum = expected("what's my mum's name?")
    assert mum.relations
    assert not holds(mum, "The user's dad's name is salvo.", message=False)
    assert not holds(mum, "my dad's name is salvo btw", message=True)
    assert holds(mum, "my mum maria is visiting", message=False)
    # A message may speak of her as "she": it names no other relation.
    manager = expected("who's my manager?")
    assert holds(manager, "not yet. she's new, called bridget", message=True)
    assert not holds(manager, "The user's sister is called bridget.", message=False)
    assert holds(Expectation(), "anything", message=False)
    # A word of several groups asks for any of them.
    kids = expected("how did melanie's children handle the accident?")
    assert holds(kids, "The user's son got into an accident on the trip.", message=False)
    assert holds(expected("how are my parents?"), "The user's dad is from palermo.", message=False)


@pytest.mark.parametrize(
    ("question", "text", "answers"),
    [
        ("what's my dog called?", "The user's greyhound is called Pixel.", True),
        ("what's my husband's name?", "The user's husband tomas is pescatarian.", True),
        ("what's my bird's name?", "The user's budgie kiwi learned to say hello.", True),
        ("what are my kids called?", "my twins start nursery in april (2026-04), eva and finn", True),
        ("what's the name of my climbing gym?", "theres one near my office called the arch", True),
        ("what is the name of Melanie's dog?", "Thanks! Our pup Oliver loves the park", True),
        ("what's the kitten's name?", "we got a kitten!! calling her biscuit", True),
        ("what's my brother's name?", "tom, my brother, is visiting", True),
        ("what's my lead's name?", "my lead is sam, she's great", True),
        ("what's the name of our wedding venue?", "our wedding venue is the old mill", True),
        ("what's my sister's name?", "my sister is visiting", False),
        # About the thing asked of, with no name: the venue "moved", the nursery is started "in".
        ("what's the name of our wedding venue?", "the venue moved our wedding date to october 3rd", False),
        ("what's the nursery called?", "The user's twins start nursery in April 2026, eva and finn.", False),
        ("what's the baby going to be called?", "The user's family're expecting a second baby in August 2025.", False),
        ("what's my lead's name?", "we're adopting trunk based development next sprint, lead's call", False),
    ],
)
def test_what_can_hold_a_name(question: str, text: str, answers: bool) -> None:
    assert holds(expected(question), text, message=not text.startswith("The user")) is answers


TESS = [
    {"role": "user", "content": "tess hurt her paw on thursday, vet says rest for 2 weeks", "correlation_id": "t1"},
    {"role": "assistant", "content": "Poor Tess! Keep her walks short."},
    {"role": "user", "content": "my dog tess loves the beach, we're taking her to scotland", "correlation_id": "t2"},
    {"role": "assistant", "content": "She will love it."},
]


@pytest.mark.django_db
def test_a_question_nothing_answers_is_answered_with_nothing(api):
    capture(api, TESS)
    body = ask(api, "how old is tess?")
    assert body["memories"] == [] and body["episodes"] == [], texts(body)
    # The ranking alone (min_score 0) still returns what is about her.
    ranking = ask(api, "how old is tess?", min_score=0)
    assert any("tess" in text.lower() for text in texts(ranking))
    # Once said, it is found.
    capture(api, [{"role": "user", "content": "tess turned 4 last week, we got her a cake lol"}], session_id="s2")
    assert any("4" in text for text in texts(ask(api, "how old is tess?")))


@pytest.mark.django_db
def test_a_question_about_one_parent_is_not_answered_by_the_other(api):
    capture(
        api,
        [
            {"role": "user", "content": "duolingo 40 day streak lol. my dad's name is salvo btw"},
            {"role": "assistant", "content": "Complimenti! Is he Italian?"},
        ],
    )
    assert texts(ask(api, "what's my mum's name?")) == []
    assert any("salvo" in text.lower() for text in texts(ask(api, "what's my dad's name?")))


@pytest.mark.django_db
def test_a_name_question_is_answered_only_by_a_name(api):
    capture(
        api,
        [
            {"role": "user", "content": "hmm the venue moved our wedding date to october 3rd, so annoying"},
            {"role": "assistant", "content": "That's frustrating! Is the new date ok for your guests?"},
        ],
    )
    assert texts(ask(api, "what's the name of our wedding venue?")) == []
    capture(api, [{"role": "user", "content": "the venue is called glenmore house btw"}], session_id="s2")
    assert any("glenmore" in text.lower() for text in texts(ask(api, "what's the name of our wedding venue?")))

"""Episodes: what users said is kept and searched beside the memories distilled from it.

Conversations go through POST /capture, the job runs in-process on the rule-based path, then
POST /retrieve asks about them: real Postgres, real embedder, no LLM.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from capture.models import CaptureJob
from capture.pipeline import run_job
from conversations.models import Message
from memories.models import Memory
from retrieval.ranking import episodes
from retrieval.vectors.memory_vectors import embed_memories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_llm(settings):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""


def capture(api, messages: list[dict[str, Any]], *, user_id: str = "alice", session_id: str = "s1") -> CaptureJob:
    body = {"user_id": user_id, "session_id": session_id, "trigger": "compaction", "messages": messages}
    response = api.post("/capture", body)
    assert response.status_code == 202, response.content
    job = CaptureJob.objects.get(pk=response.json()["job_id"])
    run_job(job_id=str(job.pk))
    job.refresh_from_db()
    assert job.status == "done", job.error
    embed_memories(list(Memory.objects.filter(pk__in=job.memory_ids)))  # the worker's embedding task
    return job


def ask(api, query: str, *, user_id: str = "alice", **fields: Any) -> dict[str, Any]:
    response = api.post("/retrieve", {"user_id": user_id, "query": query, **fields})
    assert response.status_code == 200, response.content
    return dict(response.json())


def texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["memories"]] + [e["content"] for e in body["episodes"]]


DOG = [
    {"role": "user", "content": "we adopted a greyhound on saturday, her name is Pixel", "correlation_id": "d1"},
    {"role": "assistant", "content": "Congratulations! Greyhounds are lovely, calm dogs."},
    {"role": "user", "content": "thanks! anyway can you help me plan the week", "correlation_id": "d3"},
    {"role": "assistant", "content": "Sure, what do you have on?"},
]


def test_a_fact_said_in_passing_is_found(api):
    capture(api, DOG)
    body = ask(api, "What's my dog called?")
    assert any("Pixel" in text for text in texts(body)), body


def test_what_no_memory_holds_is_found_in_the_users_own_words(api):
    job = capture(
        api,
        [
            {
                "role": "user",
                "content": "lol pixel stole a whole baguette off the counter again",
                "correlation_id": "b1",
            },
            {"role": "assistant", "content": "Oh no, greyhounds are tall enough to reach everything!"},
        ],
    )
    assert job.memory_ids == []
    body = ask(api, "what did pixel steal?")
    said = next(e for e in body["episodes"] if "baguette" in e["content"])
    assert (said["role"], said["session_id"], said["correlation_id"]) == ("user", "s1", "b1")
    assert said["score"] > 0 and said["matched_by"]
    assert "baguette" in body["injection"] and "the user said on" in body["injection"]


def test_the_celiac_sentence_is_found_for_a_question_about_food(api):
    capture(
        api,
        [
            {
                "role": "user",
                "content": "I have to be careful since my doctor confirmed I have celiac disease last month",
            },
            {"role": "assistant", "content": "Thanks for telling me, I'll keep that in mind."},
        ],
    )
    body = ask(api, "Is there anything I can't eat?")
    assert any("celiac" in text for text in texts(body)), body


def test_a_message_sent_again_in_a_later_window_is_stored_once(api):
    capture(api, DOG[:2])
    capture(api, DOG)
    stored = Message.objects.filter(conversation__user_id="alice").order_by("seq")
    assert [m.content for m in stored] == [m["content"] for m in DOG]


def test_the_message_time_is_kept(api):
    said = {"role": "user", "content": "quick one: are greyhounds fast?", "timestamp": "2026-03-09T10:00:00+01:00"}
    capture(api, [said])
    message = Message.objects.get(conversation__user_id="alice")
    assert message.said_at.isoformat() == "2026-03-09T09:00:00+00:00"
    body = ask(api, "greyhounds")
    assert body["episodes"][0]["said_at"].startswith("2026-03-09T09:00:00")


def test_a_bad_timestamp_is_a_422_and_stores_nothing(api):
    body = {
        "user_id": "alice",
        "trigger": "compaction",
        "messages": [{"role": "user", "content": "hello there", "timestamp": "last tuesday"}],
    }
    response = api.post("/capture", body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"
    assert not Message.objects.exists() and not CaptureJob.objects.exists()


def test_a_memory_names_the_message_it_came_from_and_is_not_returned_beside_it(api):
    job = capture(
        api,
        [
            {"role": "user", "content": "My sister Nina is a nurse in Leeds.", "correlation_id": "n1"},
            {"role": "assistant", "content": "That's a demanding job!"},
        ],
    )
    memory = Memory.objects.get(pk=job.memory_ids[0])
    message = Message.objects.get(correlation_id="n1")
    assert memory.source["messages"] == [{"id": str(message.pk), "correlation_id": "n1"}]
    assert memory.source["extractor"] == "rules"
    fetched = api.get(f"/memories/{memory.pk}", user_id="alice").json()
    assert fetched["source"]["messages"][0]["id"] == str(message.pk)

    body = ask(api, "What does my sister do for a living?")
    assert [m["id"] for m in body["memories"]][:1] == [str(memory.pk)]
    assert str(message.pk) not in [e["id"] for e in body["episodes"]]


def test_episodes_never_cross_users_or_projects(api, other_api):
    capture(api, DOG)
    assert ask(api, "What's my dog called?", user_id="mallory")["episodes"] == []
    assert ask(other_api, "What's my dog called?")["episodes"] == []


def test_episodes_are_erased_with_their_user(api):
    capture(api, DOG)
    assert api.delete("/users/alice").status_code == 200
    assert not Message.objects.filter(conversation__user_id="alice").exists()
    assert ask(api, "What's my dog called?")["episodes"] == []


def test_a_request_can_leave_episodes_out_and_a_kind_filter_does(api):
    capture(api, DOG)
    assert ask(api, "What's my dog called?", episodes=False)["episodes"] == []
    assert ask(api, "What's my dog called?", kinds=["fact"])["episodes"] == []


def test_the_turn_cache_answers_with_the_same_episodes(api):
    capture(api, DOG)
    first = ask(api, "What's my dog called?", turn_id="t1")
    again = ask(api, "What's my dog called?", turn_id="t1")
    assert again["cached"] is True
    assert [e["id"] for e in again["episodes"]] == [e["id"] for e in first["episodes"]]
    assert again["injection"] == first["injection"]


def test_the_query_memory_tool_returns_episodes_as_their_own_type(api):
    capture(api, [{"role": "user", "content": "lol pixel stole a whole baguette off the counter again"}])
    response = api.post("/tools/query_memory", {"user_id": "alice", "query": "what did pixel steal?"})
    assert response.status_code == 200
    said = [m for m in response.json()["memories"] if m["type"] == "episode"]
    assert said and "baguette" in said[0]["content"] and said[0]["context"].startswith("the user said on ")
    assert response.json()["metadata"]["by_category"]["episodes"]


@pytest.mark.django_db(transaction=True)
def test_episodes_travel_with_an_export_and_are_found_after_import(api, other_api):
    said = {"role": "user", "content": "lol pixel stole a whole baguette", "timestamp": "2026-03-09T10:00:00+00:00"}
    capture(api, [said])
    exported = api.client.get("/api/v1/export?conversations=true", headers=api._headers())
    body = b"".join(exported.streaming_content).decode()
    imported = other_api.client.post(
        "/api/v1/import", body, content_type="application/x-ndjson", headers=other_api._headers()
    )
    assert imported.status_code == 200, imported.content
    copy = Message.objects.get(conversation__project=other_api.project)
    assert copy.said_at.isoformat() == "2026-03-09T10:00:00+00:00"
    from retrieval.vectors.message_vectors import embed_messages

    embed_messages(message_ids=[str(copy.pk)])  # the worker's embedding task
    assert "baguette" in ask(other_api, "what did pixel steal?")["episodes"][0]["content"]


def test_with_the_embedder_down_episodes_are_found_by_their_words(api, settings, fake_openai):
    from memories.models import Project
    from retrieval.embedding import embedders
    from tests.support.openai_server import Fault

    capture(api, [{"role": "user", "content": "lol pixel stole a whole baguette off the counter again"}])
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    Project.objects.filter(pk=api.project.pk).update(active_embedding_model="fake-embed")
    embedders.reset_embedder_cache()
    fake_openai.script_embeddings(Fault(status=503))
    try:
        body = ask(api, "did pixel steal the baguette")
    finally:
        embedders.reset_embedder_cache()
    assert body["degraded"] == ["embedder_unavailable"]
    assert [(e["matched_by"], "baguette" in e["content"]) for e in body["episodes"]] == [(["keyword"], True)]


def test_a_message_whose_memory_was_superseded_ranks_at_half_its_score(api):
    capture(api, [{"role": "user", "content": "My sister Nina is a nurse in Leeds.", "correlation_id": "old"}])
    memory = Memory.objects.get(user_id="alice", content__contains="nurse")
    said = str(Message.objects.get(correlation_id="old").pk)
    # While the memory stands, it stands for its message.
    assert said not in [e["id"] for e in ask(api, "nina nurse leeds", min_score=0)["episodes"]]
    replaced = api.post(f"/memories/{memory.pk}/supersede", {"user_id": "alice", "content": "Nina moved to York."})
    assert replaced.status_code == 201

    def score() -> float:
        return {e["id"]: e["score"] for e in ask(api, "nina nurse leeds", min_score=0)["episodes"]}[said]

    outdated = score()
    Memory.objects.filter(pk=memory.pk).update(source={})  # the superseded memory no longer names it
    assert outdated == pytest.approx(score() / 2, abs=1e-4)


def two_sessions(api, first: list[tuple[str, str]], later: list[tuple[str, str]]) -> None:
    """Two sessions of alice's, each its (role, content) messages."""
    for session_id, said in (("s1", first), ("s2", later)):
        capture(api, [{"role": role, "content": content} for role, content in said], session_id=session_id)


def ranked(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Memories and episodes as one ranking, best first."""
    return sorted([*body["memories"], *body["episodes"]], key=lambda item: -item["score"])


def test_a_later_message_saying_it_changed_outranks_the_earlier_one(api):
    two_sessions(
        api,
        [
            ("user", "learning italian for a trip to sicily with my dad in june"),
            ("assistant", "Sounds wonderful! Palermo is lovely in June."),
        ],
        [
            ("user", "bad news, dad broke his ankle so sicily is postponed to september"),
            ("assistant", "Sorry to hear that, I hope he heals quickly."),
        ],
    )
    body = ask(api, "when are we going to sicily?", min_score=0)
    # The postponement is found as the message or as the memory capture made of it.
    order = ranked(body)
    assert "postponed" in order[0]["content"], order
    june = next(e for e in body["episodes"] if "june" in e["content"])
    # Nothing later said the postponement changed: it keeps its whole score.
    assert june["score"] < order[0]["score"]


def test_only_a_later_message_on_the_same_subject_that_says_it_changed_outdates():
    def said(content: str, day: int, words: str) -> episodes.Episode:
        return episodes.Episode(
            id=content, conversation_id="c", session_id="s", role="user", content=content,
            said_at=datetime(2026, 3, day, tzinfo=UTC), words=frozenset(words.split()),
        )  # fmt: skip

    nurse = said("my sister nora is a nurse in leeds", 1, "sister nora nurs leed")
    solo = said("i'm going solo", 2, "go solo")
    other = said("we switched the team chat to matrix", 3, "switch team chat matrix")
    company = said("not solo anymore, dev is coming", 4, "solo anymor dev come")
    earlier = said("dropped it, going solo", 1, "drop go solo")
    found = [nurse, solo, other, company, earlier]
    episodes._overtaken(found)
    assert [e.outdated for e in found] == [False, True, False, False, True]


def test_a_message_goes_when_its_memory_says_it_and_stays_when_the_memory_kept_only_part() -> None:
    def said(content: str) -> episodes.Episode:
        return episodes.Episode(
            id=content, conversation_id="c", session_id="s", role="user", content=content,
            said_at=datetime(2026, 3, 1, tzinfo=UTC), score=0.3,
        )  # fmt: skip

    whole = said("i prefer poetry over pip, dont give me requirements.txt stuff")
    part = said("observability for ml pipelines. my colleague june co-presented")
    kept = [
        (Memory(content="The user prefers poetry over pip, don't give the user requirements.txt stuff.",
                source={"messages": [{"id": whole.id}]}), 0.2),
        (Memory(content="The user's colleague june co-presented.", source={"messages": [{"id": part.id}]}), 0.2),
    ]  # fmt: skip
    ranked, left = episodes.without_sources(kept, [whole, part])
    assert left == [part]  # the talk's subject is in no memory
    assert [score for _, score in ranked] == [0.3, 0.2]  # the memory that stands for its message takes its score


def test_a_fact_in_one_clause_of_a_long_message_is_found_by_that_clause(api):
    capture(
        api,
        [
            {"role": "assistant", "content": "Happy to help with meal planning. What does your week look like?"},
            {
                "role": "user",
                "content": "ugh chaotic. can you plan cheap dinners for the whole week? i work nights as a paramedic "
                "so my sleep is a mess, and the kids hate anything green lol",
            },
        ],
    )
    body = ask(api, "what's my job?")
    assert any("paramedic" in text for text in texts(body)), body


def test_a_later_message_about_the_same_thing_takes_the_place_of_what_it_changed(api):
    two_sessions(
        api,
        [
            ("assistant", "What does your setup look like?"),
            ("user", "our app is a rails monolith btw, and we host it on heroku"),
        ],
        [
            ("assistant", "How did the quarter go?"),
            ("user", "update, we actually ditched heroku, everything runs on render now, cheaper"),
        ],
    )
    first = ranked(ask(api, "where do we host the app?"))
    assert first and "render" in first[0]["content"], first


def test_a_change_word_outdates_an_earlier_message_close_in_meaning_without_a_shared_word():
    def said(content: str, day: int, direction: list[float]) -> episodes.Episode:
        vector = np.asarray([direction], dtype=np.float32)
        return episodes.Episode(
            id=content, conversation_id="c", session_id="s", role="user", content=content,
            said_at=datetime(2026, 3, day, tzinfo=UTC), vectors=vector / np.linalg.norm(vector),
        )  # fmt: skip

    shell = said("i use zsh with oh-my-zsh", 1, [1.0, 0.2, 0.0])
    pets = said("my cat sleeps on the keyboard", 2, [0.0, 0.0, 1.0])
    fish = said("switched to fish, it just works", 3, [0.9, 0.5, 0.0])
    found = [shell, pets, fish]
    episodes._overtaken(found)
    assert [(e.outdated, e.overtaken_by) for e in found] == [(True, fish), (False, None), (False, None)]


def test_a_message_embedded_before_messages_had_passages_is_embedded_again_by_the_sweeper(api):
    from datetime import timedelta

    from django.utils import timezone

    from retrieval.vectors.message_vectors import embed_messages, messages_awaiting_embedding

    capture(api, [{"role": "user", "content": "plan dinners for me? i work nights as a paramedic, so i eat late"}])
    said = Message.objects.get(role="user")
    assert said.passage_vectors  # its clauses, embedded with it
    Message.objects.filter(pk=said.pk).update(passage_vectors=None)  # as a message stored before passages
    later = timezone.now() + timedelta(seconds=1)
    assert messages_awaiting_embedding(older_than=later, limit=10) == [str(said.pk)]
    assert embed_messages(message_ids=[str(said.pk)]) == 1
    said.refresh_from_db()
    assert len(bytes(said.passage_vectors)) == 3 * 384 * 4
    assert messages_awaiting_embedding(older_than=later, limit=10) == []

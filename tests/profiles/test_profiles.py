"""Profiles: built from a user's active memories, versioned, kept to their budget, isolated per
user and per project, injected first by /retrieve."""

from __future__ import annotations

import pytest

from memories import services as memory_services
from profiles import services
from profiles.models import Profile
from profiles.tasks import rebuild_profiles_task
from retrieval.ranking.tokens import count_tokens


def rebuild(api, user_id="alice"):
    return services.profile_rebuild(project=api.project, user_id=user_id)


def test_profile_holds_standing_facts_and_the_memories_they_rest_on(api, make_memory):
    allergy = make_memory(content="Alice is allergic to peanuts.")
    make_memory(content="Alice asked for a pasta recipe on Tuesday.", kind="note")
    profile = rebuild(api)
    assert profile.text == "- Alice is allergic to peanuts."
    assert profile.facts[0]["memory_ids"] == [allergy["id"]]


def test_profile_drops_a_superseded_fact(api, make_memory, alice):
    job = make_memory(content="Alice works as a nurse.")
    assert "nurse" in rebuild(api).text
    api.post(f"/memories/{job['id']}/supersede", {"user_id": alice, "content": "Alice works as a teacher now."})
    profile = rebuild(api)
    assert "teacher" in profile.text and "nurse" not in profile.text
    assert profile.version == 2


def test_profile_drops_a_forgotten_fact(api, make_memory, alice):
    partner = make_memory(content="Alice's partner is called Sam.")
    make_memory(content="Alice is vegan.")
    rebuild(api)
    api.delete(f"/memories/{partner['id']}", user_id=alice)
    assert rebuild(api).text == "- Alice is vegan."


def test_a_rebuild_that_changes_nothing_writes_no_version(api, make_memory):
    make_memory(content="Alice is vegan.")
    first = rebuild(api)
    again = rebuild(api)
    assert (first.version, again.version, again.versions.count()) == (1, 1, 1)


def test_the_profile_of_a_user_with_1000_memories_fits_200_tokens(api, alice):
    drafts = [
        memory_services.MemoryDraft(
            user_id=alice, content=f"Alice prefers tool number {i} for task {i}.", kind="preference"
        )
        for i in range(997)
    ]
    drafts += [
        memory_services.MemoryDraft(user_id=alice, content="Alice has celiac disease, so no gluten."),
        memory_services.MemoryDraft(user_id=alice, content="Alice works as a data engineer."),
        memory_services.MemoryDraft(user_id=alice, content="Alice's partner is called Jess."),
    ]
    memory_services.memory_bulk_create(project=api.project, drafts=drafts, actor="test")
    profile = rebuild(api)
    assert profile.token_count == count_tokens(profile.text) <= 200
    for fact in ("celiac", "data engineer", "Jess"):
        assert fact in profile.text


def test_a_pinned_fact_and_a_hidden_memory_survive_rebuilds(api, make_memory):
    wrong = make_memory(content="Alice lives in Paris.")
    make_memory(content="Alice is vegan.")
    services.profile_edit(
        project=api.project, user_id="alice", pinned=["Call her Ali."], hidden=[wrong["id"]], actor="user:admin"
    )
    make_memory(content="Alice works as a pilot.")
    profile = rebuild(api)
    assert profile.text.splitlines()[0] == "- Call her Ali."
    assert "Paris" not in profile.text and "pilot" in profile.text
    assert [v.actor for v in profile.versions.order_by("version")] == ["user:admin", "system:profile"]


def test_profiles_are_per_user_and_per_project(api, other_api, make_memory, alice, mallory):
    make_memory(user_id=alice, content="Alice is allergic to shellfish.")
    make_memory(user_id=mallory, content="Mallory is vegan.")
    assert rebuild(api, mallory).text == "- Mallory is vegan."
    rebuild(api, alice)
    assert other_api.get(f"/users/{alice}/profile").status_code == 404
    assert services.profile_rebuild(project=other_api.project, user_id=alice) is None


def test_get_profile_answers_200_404_and_422(api, make_memory, alice):
    assert api.get(f"/users/{alice}/profile").json()["error"]["code"] == "profile_not_found"
    make_memory(content="Alice is vegan.")
    rebuild(api)
    answer = api.get(f"/users/{alice}/profile")
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {
        "user_id",
        "text",
        "facts",
        "version",
        "token_count",
        "updated_at",
        "pinned",
        "hidden_memory_ids",
    }
    assert body["facts"][0]["text"] == "Alice is vegan." and body["version"] == 1
    assert api.get(f"/users/{'x' * 256}/profile").status_code == 422


def test_rebuild_on_request_answers_the_profile(api, make_memory, alice):
    assert api.post(f"/users/{alice}/profile/rebuild", {}).status_code == 404
    make_memory(content="Alice is vegan.")
    answer = api.post(f"/users/{alice}/profile/rebuild", {})
    assert (answer.status_code, answer.json()["text"]) == (200, "- Alice is vegan.")


def test_a_profile_is_edited_through_the_api_and_each_edit_is_a_version(api, make_memory, alice):
    wrong = make_memory(content="Alice lives in Paris.")
    make_memory(content="Alice is vegan.")
    rebuild(api)
    answer = api.patch(
        f"/users/{alice}/profile", {"pinned": ["Call her Ali."], "hidden_memory_ids": [wrong["id"]], "reason": "moved"}
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["text"].splitlines() == ["- Call her Ali.", "- Alice is vegan."]
    assert (body["pinned"], body["hidden_memory_ids"], body["version"]) == (["Call her Ali."], [wrong["id"]], 2)
    # A field left out keeps its value; the edit survives the next rebuild.
    assert api.patch(f"/users/{alice}/profile", {"pinned": []}).json()["hidden_memory_ids"] == [wrong["id"]]
    make_memory(content="Alice works as a pilot.")
    assert "Paris" not in rebuild(api).text
    versions = api.get(f"/users/{alice}/profile/versions").json()["versions"]
    assert [v["version"] for v in versions] == [4, 3, 2, 1]
    assert (versions[2]["reason"], versions[2]["pinned"], versions[2]["actor"].startswith("api_key:")) == (
        "moved",
        ["Call her Ali."],
        True,
    )


def test_a_profile_edit_refuses_another_users_memory_and_changes_nothing(api, other_api, make_memory, alice, mallory):
    make_memory(user_id=alice, content="Alice is vegan.")
    theirs = make_memory(user_id=mallory, content="Mallory lives in Oslo.")
    before = rebuild(api, alice)
    for hidden in ([theirs["id"]], ["not-a-uuid"]):
        answer = api.patch(f"/users/{alice}/profile", {"hidden_memory_ids": hidden})
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "invalid_profile"
    assert api.patch(f"/users/{alice}/profile", {"pinned": ["x" * 501]}).status_code == 422
    assert api.patch(f"/users/{alice}/profile", {"pinnned": ["typo"]}).status_code == 422
    after = Profile.objects.get(project=api.project, user_id=alice)
    assert (after.version, after.pinned, after.hidden_memory_ids) == (before.version, [], [])
    assert other_api.get(f"/users/{alice}/profile/versions").status_code == 404


def test_a_memory_change_queues_one_debounced_rebuild(
    api, make_memory, redis, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        make_memory(content="Alice is vegan.")
    key = services.queued_key(api.project.pk, alice)
    assert redis.get(key) == b"1"
    with django_capture_on_commit_callbacks(execute=True):
        make_memory(content="Alice works as a pilot.")
    assert Profile.objects.filter(user_id=alice).count() == 0  # nothing until the task runs
    assert rebuild_profiles_task(api.project.pk, alice) == [alice]
    assert redis.get(key) is None
    assert "pilot" in Profile.objects.get(user_id=alice).text


@pytest.mark.parametrize("shared", ["project"])
def test_a_shared_convention_reaches_every_profile_of_the_project(api, make_memory, alice, mallory, shared):
    make_memory(user_id=alice, content="Alice is vegan.")
    make_memory(user_id=mallory, content="Mallory is vegan.")
    rebuild(api, alice), rebuild(api, mallory)
    make_memory(content="The team formats Python with ruff.", scope=shared, category="project-conventions")
    assert sorted(rebuild_profiles_task(api.project.pk, "")) == [alice, mallory]
    assert "ruff" in Profile.objects.get(user_id=mallory).text


@pytest.mark.parametrize(
    ("content", "section"),
    [
        ("The user is starting at monzo on 2026-03-02.", "work"),
        ("The user's twins start nursery in April 2026, eva and finn.", "identity"),
        ("The user has gone vegan since the start of march.", "constraints"),
        ("The user started yoga too.", None),
    ],
)
def test_a_memory_goes_to_the_section_its_words_name(content: str, section: str | None) -> None:
    from datetime import UTC, datetime

    from profiles.builder import Candidate, section_of

    memory = Candidate("m", content, "fact", "user-facts", "user", 0.5, datetime(2026, 3, 1, tzinfo=UTC))
    assert section_of(memory) == section

"""/retrieve starts its injection with the user's profile, within its share of the budget."""

from __future__ import annotations

from profiles import services
from retrieval.ranking.packing import PackItem, ProfileFact, pack
from retrieval.ranking.tokens import count_tokens


def test_injection_starts_with_the_profile(api, make_memory, alice):
    allergy = make_memory(content="Alice is allergic to peanuts.")
    make_memory(content="Alice keeps a sourdough starter called Bob.", kind="note")
    services.profile_rebuild(project=api.project, user_id=alice)
    body = api.post("/retrieve", {"user_id": alice, "query": "what should I bake with peanuts?"}).json()
    assert body["injection"].startswith("## About this user")
    assert body["profile"]["facts"] == [{"text": "Alice is allergic to peanuts.", "memory_ids": [allergy["id"]]}]
    # Retrieved too, but said once: in the profile.
    assert body["injection"].count("allergic to peanuts") == 1
    assert body["token_count"] == count_tokens(body["injection"])


def test_profile_false_leaves_the_profile_out(api, make_memory, alice):
    make_memory(content="Alice is allergic to peanuts.")
    services.profile_rebuild(project=api.project, user_id=alice)
    body = api.post("/retrieve", {"user_id": alice, "query": "peanuts", "profile": False}).json()
    assert body["profile"] is None and "About this user" not in body["injection"]


def test_another_users_profile_is_never_injected(api, make_memory, alice, mallory):
    make_memory(user_id=alice, content="Alice is allergic to peanuts.")
    services.profile_rebuild(project=api.project, user_id=alice)
    body = api.post("/retrieve", {"user_id": mallory, "query": "peanuts"}).json()
    assert body["profile"] is None and "peanuts" not in body["injection"]


def test_the_profile_stays_within_its_share_of_the_budget():
    facts = [ProfileFact(f"Fact number {i} about the user, stated plainly.", (f"m{i}",)) for i in range(40)]
    items = [PackItem(id="x", content="A retrieved memory.", kind="fact", category="", scope="user", version=1)]
    packed = pack(items, token_budget=400, profile=facts, profile_share=0.25)
    assert 0 < packed.profile_tokens <= 100 and len(packed.profile_facts) < 40
    assert packed.token_count == count_tokens(packed.injection) <= 400
    assert packed.injection.startswith("## About this user") and "A retrieved memory." in packed.injection


def test_a_memory_a_profile_fact_rests_on_is_not_repeated():
    facts = [ProfileFact("Is vegan.", ("a",))]
    items = [
        PackItem(id="a", content="Is vegan.", kind="fact", category="", scope="user", version=1),
        PackItem(id="b", content="Owns a cat.", kind="fact", category="", scope="user", version=1),
    ]
    packed = pack(items, token_budget=500, profile=facts, profile_share=0.25)
    assert packed.injection.count("Is vegan.") == 1 and packed.included_ids == ["a", "b"]

"""Isolation fuzzing: thousands of adversarial requests, zero leaks.

Two tenants share user ids on purpose. Every victim row carries a canary string; an attacker
(another user of tenant A, or tenant B's key) calls every endpoint with victims' ids planted in
paths, ``supersedes``, ``related`` and bulk bodies, and with user-id variants (case, spaces,
zero-width and full-width look-alikes, NFD forms, very long, empty). A leak is a victim's
canary (or private id) in any response, or any change to a victim's rows. User ids are opaque
and matched exactly (docs/adr/0017-opaque-user-ids-and-fuzzing.md), so every variant is another user.

``ISOLATION_FUZZ_REQUESTS`` sets the count (10,000 by default); the seed is fixed, so a
failure reproduces.
"""

from __future__ import annotations

import json
import os
import random
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.test import Client

from capture.models import CaptureJob
from memories import tenancy
from memories.models import Memory, Project, ScratchpadEntry

pytestmark = pytest.mark.django_db

REQUESTS = int(os.environ.get("ISOLATION_FUZZ_REQUESTS", "10000"))
SEED = 20261123


@dataclass
class Tenant:
    project: Project
    key: str
    # user id -> the ids of that user's private things, and their canaries
    private: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    shared_canaries: list[str] = field(default_factory=list)


def call(client: Client, key: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
    url = f"/api/v1{path}" + (f"?{urlencode(params)}" if params else "")
    headers = {"Authorization": f"Bearer {key}"}
    if body is None:
        return getattr(client, method)(url, headers=headers)
    return getattr(client, method)(url, json.dumps(body), content_type="application/json", headers=headers)


def plant(client: Client, tenant: Tenant, user_id: str) -> None:
    """A user's private memories (a chain and a link), conversation, capture job and scratchpad."""
    tag = f"CANARY{tenant.project.pk}x{abs(hash(user_id)) % 10**8}"
    ids: dict[str, list[str]] = {"memory": [], "conversation": [], "job": [], "canary": []}
    first = call(client, tenant.key, "post", "/memories", {"user_id": user_id, "content": f"{tag}a bees."}).json()
    second = call(
        client,
        tenant.key,
        "post",
        "/memories",
        {"user_id": user_id, "content": f"{tag}b honey.", "related": [{"id": first["id"]}]},
    ).json()
    newer = call(
        client,
        tenant.key,
        "post",
        f"/memories/{second['id']}/supersede",
        {"user_id": user_id, "content": f"{tag}c honey online."},
    ).json()
    conversation = call(client, tenant.key, "post", "/conversations", {"user_id": user_id}).json()["id"]
    said = {"user_id": user_id, "messages": [{"role": "user", "content": f"{tag}d hello"}]}
    call(client, tenant.key, "post", f"/conversations/{conversation}/messages", said)
    turn = {"user_id": user_id, "trigger": "turn", "messages": [{"role": "user", "content": f"{tag}e I like tea."}]}
    job = call(client, tenant.key, "post", "/capture", turn).json()["job_id"]
    call(client, tenant.key, "put", f"/scratchpad/{tag}key", {"user_id": user_id, "value": f"{tag}f plan"})
    shared = call(
        client,
        tenant.key,
        "post",
        "/memories",
        {"user_id": user_id, "content": f"SHARED{tag} the team uses Postgres.", "scope": "project"},
    ).json()
    ids["memory"] += [first["id"], second["id"], newer["id"]]
    ids["conversation"].append(conversation)
    ids["job"].append(job)
    ids["canary"].append(tag)
    ids["shared"] = [shared["id"]]
    tenant.private[user_id] = ids
    tenant.shared_canaries.append(f"SHARED{tag}")


def variants(user_id: str) -> list[str]:
    return [
        user_id.upper(),
        user_id.capitalize(),
        f" {user_id}",
        f"{user_id} ",
        f"{user_id}\u200b",
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in user_id),  # full-width
        unicodedata.normalize("NFD", user_id + "\u00e9"),
        user_id + "\u00e9",
        user_id + "%",
        user_id + "*",
        "x" * 255,
        "",
        user_id + "\x00",
    ]


def snapshot() -> tuple[Any, ...]:
    memories = tuple(
        Memory.objects.order_by("pk").values_list("pk", "user_id", "content", "status", "supersedes_id", "updated_at")
    )
    pads = tuple(ScratchpadEntry.objects.order_by("pk").values_list("pk", "user_id", "key", "value"))
    jobs = tuple(CaptureJob.objects.order_by("pk").values_list("pk", "user_id", "status"))
    return memories, pads, jobs


@pytest.fixture
def world() -> tuple[Tenant, Tenant]:
    client = Client()
    tenants = []
    for slug in ("fuzz-a", "fuzz-b"):
        project = tenancy.project_get_or_create(slug=slug, team_slug=slug)
        Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=0)
        _, key = tenancy.api_key_create(project=project, name="fuzz")
        tenants.append(Tenant(project=project, key=key))
    a, b = tenants
    for user_id in ("alice", "bob"):
        plant(client, a, user_id)
    for user_id in ("alice", "carol"):  # the same id in tenant B is another person
        plant(client, b, user_id)
    call(client, a.key, "post", "/memories", {"user_id": "mallory", "content": "Mallory keeps notes."})
    return a, b


def attack(rng: random.Random, a: Tenant, b: Tenant) -> tuple[str, str, str, Any, dict[str, Any], str]:
    """One adversarial request: (key, method, path, body, params, attacker user id)."""
    # Tenant A's mallory attacks everyone; tenant B's key attacks tenant A's ids.
    if rng.random() < 0.7:
        key, home, attacker = a.key, a, rng.choice(["mallory", *variants("alice"), *variants("bob")])
        victims = [*a.private.values(), *b.private.values()]
    else:
        key, home, attacker = b.key, b, rng.choice(["alice", "carol", "mallory", *variants("bob")])
        victims = list(a.private.values())
    del home
    victim = rng.choice(victims)
    memory = rng.choice(victim["memory"] + victim["shared"])
    conversation, job = victim["conversation"][0], victim["job"][0]
    pad_key = f"{victim['canary'][0]}key"
    user = attacker
    choices = [
        ("get", f"/memories/{memory}", None, {"user_id": user}),
        ("get", f"/memories/{memory}/history", None, {"user_id": user}),
        ("patch", f"/memories/{memory}", {"user_id": user, "content": "pwned"}, {}),
        ("post", f"/memories/{memory}/supersede", {"user_id": user, "content": "pwned"}, {}),
        ("delete", f"/memories/{memory}", None, {"user_id": user}),
        ("post", "/memories", {"user_id": user, "content": "pwned", "supersedes": memory}, {}),
        ("post", "/memories", {"user_id": user, "content": "pwned link", "related": [{"id": memory}]}, {}),
        (
            "post",
            "/memories/bulk",
            {
                "memories": [
                    {"user_id": user, "content": "pwned bulk", "supersedes": memory, "related": [{"id": memory}]}
                ]
            },
            {},
        ),
        ("get", "/memories", None, {"user_id": user, "q": victim["canary"][0]}),
        ("get", "/memories", None, {"user_id": user, "status": rng.choice(["active", "superseded", "deleted"])}),
        ("post", "/retrieve", {"user_id": user, "query": f"{victim['canary'][0]}a bees", "hop_depth": 3}, {}),
        ("post", "/retrieve", {"user_id": user, "query": "honey online", "include_superseded": True}, {}),
        ("post", "/tools/query_memory", {"user_id": user, "query": "honey bees tea"}, {}),
        ("get", f"/capture/{job}", None, {"user_id": user}),
        ("get", f"/conversations/{conversation}", None, {"user_id": user}),
        ("get", f"/conversations/{conversation}/recent", None, {"user_id": user}),
        (
            "post",
            f"/conversations/{conversation}/messages",
            {"user_id": user, "messages": [{"role": "user", "content": "pwned"}]},
            {},
        ),
        ("get", f"/scratchpad/{quote(pad_key)}", None, {"user_id": user}),
        ("put", f"/scratchpad/{quote(pad_key)}", {"user_id": user, "value": "pwned"}, {}),
        ("get", "/scratchpad/search", None, {"user_id": user, "q": victim["canary"][0]}),
        ("get", "/scratchpad", None, {"user_id": user}),
    ]
    method, path, body, params = rng.choice(choices)
    return key, method, path, body, params, attacker


def markers(tag: str) -> list[str]:
    """The private texts :func:`plant` stored under ``tag``."""
    return [
        f"{tag}a bees.",
        f"{tag}b honey.",
        f"{tag}c honey online.",
        f"{tag}d hello",
        f"{tag}e I like",
        f"{tag}f plan",
    ]


def visible_to(tenant: Tenant, user_id: str) -> set[str]:
    """Canaries this caller may legitimately see: its own, and its tenant's shared memories."""
    return set(tenant.private.get(user_id, {}).get("canary", []))


def fuzz(world: tuple[Tenant, Tenant], requests: int) -> tuple[list[str], dict[int, int], list[str]]:
    """Send ``requests`` attacks; the leaks found, the status counts, and what changed."""
    a, b = world
    client = Client()
    rng = random.Random(SEED)
    before = snapshot()
    victims = {(t.key, u): set(d["canary"]) for t in (a, b) for u, d in t.private.items()}
    every = {c for canaries in victims.values() for c in canaries}
    private_ids = {
        i for t in (a, b) for d in t.private.values() for k in ("memory", "conversation", "job") for i in d[k]
    }
    statuses: dict[int, int] = {}
    leaks: list[str] = []
    for number in range(requests):
        key, method, path, body, params, attacker = attack(rng, a, b)
        response = call(client, key, method, path, body, **params)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (number, method, path, body, params, response.content[:300])
        text = response.content.decode(errors="replace")
        asked = path + json.dumps(body or {}, ensure_ascii=False) + json.dumps(params, ensure_ascii=False)
        tenant = a if key == a.key else b
        allowed = visible_to(tenant, attacker)
        # A victim's stored text (not an echo of what the attacker sent) in the answer.
        seen = {marker for c in every - allowed for marker in markers(c) if marker in text and marker not in asked}
        own = tenant.private.get(attacker, {})
        mine = {i for k in ("memory", "conversation", "job") for i in own.get(k, [])}
        ids = {i for i in private_ids - mine if i in text and i not in asked}
        if seen or ids:
            leaks.append(f"#{number} {method} {path} {params} {body}: canaries {sorted(seen)} ids {sorted(ids)[:3]}")
    after = snapshot()
    # Tenant A's shared (project-scope) memories are every A user's to edit (docs/api.md): the
    # attacker may change those; nobody else's row may change.
    shared_in_a = {i for d in a.private.values() for i in d["shared"]}
    kept = {r[0]: r for r in before[0] if r[1] != "mallory" and "pwned" not in r[2] and str(r[0]) not in shared_in_a}
    now = {r[0]: r for r in after[0]}
    changed = [f"memory {pk}" for pk, row in kept.items() if now.get(pk) != row]
    pads = {p[0]: p for p in after[1]}
    changed += [f"scratchpad {p[0]}" for p in before[1] if pads.get(p[0]) != p]
    return leaks, statuses, changed


def test_ten_thousand_adversarial_requests_leak_nothing(world):
    leaks, statuses, changed = fuzz(world, REQUESTS)
    print(f"isolation fuzz: {REQUESTS} requests, statuses {dict(sorted(statuses.items()))}, leaks {len(leaks)}")
    assert leaks == [], leaks[:10]
    assert changed == [], changed[:10]
    assert REQUESTS >= 10_000 or "ISOLATION_FUZZ_REQUESTS" in os.environ


def test_the_fuzzer_finds_a_planted_leak(world, monkeypatch, settings):
    """The same attacks against a selector that forgot the user filter (and no second wall)."""
    from memories import selectors

    def visible_to_everyone_in_the_project(*, project, user_id):
        return Memory.objects.filter(project=project, status__in=selectors.LIVE_STATUSES)

    monkeypatch.setattr(selectors, "memories_visible", visible_to_everyone_in_the_project)
    settings.MEMORYHUB_ROW_SECURITY = False
    leaks, _, _ = fuzz(world, 300)
    assert leaks

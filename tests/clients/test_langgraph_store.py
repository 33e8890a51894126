"""``MemoryHubStore`` (LangGraph's ``BaseStore`` on MemoryHub) against the live test server, through
LangGraph's own store API and a compiled LangGraph graph. LangGraph ships no conformance suite for
stores in its wheel, so these tests hold the store to ``BaseStore``'s documented behaviour."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypedDict

import httpx2
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError, PutOp
from memoryhub_client import AsyncMemoryHub, MemoryHub, RateLimited
from memoryhub_client.langgraph import MemoryHubStore

from memories.models import Project


@pytest.fixture
def store(hub: MemoryHub) -> Iterator[MemoryHubStore]:
    yield MemoryHubStore(hub)


def test_put_then_get_returns_the_value_and_a_second_put_supersedes_it(store, hub):
    store.put(("alice", "prefs"), "drink", {"text": "Alice drinks green tea.", "strength": 2})
    first = store.get(("alice", "prefs"), "drink")
    store.put(("alice", "prefs"), "drink", {"text": "Alice switched to black coffee.", "strength": 3})
    item = store.get(("alice", "prefs"), "drink")
    assert item.value == {"text": "Alice switched to black coffee.", "strength": 3}
    assert (item.namespace, item.key) == (("alice", "prefs"), "drink")
    assert item.created_at == first.created_at and item.updated_at > first.updated_at
    [memory] = hub.list_memories(user_id="alice", status="active").items
    assert memory.version == 2 and memory.content == '{"strength": 3, "text": "Alice switched to black coffee."}'
    older = hub.memory_history(memory_id=memory.id, user_id="alice").chain[0]
    assert older.status == "superseded" and older.metadata["langgraph"]["value"]["strength"] == 2


def test_each_write_carries_an_idempotency_key_so_a_retry_never_writes_twice(server, key):
    sent: list[tuple[str, str, str | None]] = []

    def record(request: httpx2.Request) -> None:
        sent.append((request.method, request.url.path, request.headers.get("Idempotency-Key")))

    with httpx2.Client(timeout=30, event_hooks={"request": [record]}) as http:
        store = MemoryHubStore(MemoryHub(base_url=server, api_key=key, http=http))
        store.put(("alice", "prefs"), "k", {"text": "Alice takes the train."})
        store.put(("alice", "prefs"), "k", {"text": "Alice cycles to work."})
    writes = [(path, idem) for method, path, idem in sent if method == "POST"]
    assert [path.rsplit("/", 1)[-1] for path, _ in writes] == ["memories", "supersede"]
    assert all(writes[0][1] and writes[1][1]) and writes[0][1] != writes[1][1]


def test_delete_and_a_none_value_forget_the_key(store, hub):
    store.put(("alice", "prefs"), "a", {"text": "Alice likes chess."})
    store.put(("alice", "prefs"), "b", {"text": "Alice likes go."})
    store.delete(("alice", "prefs"), "a")
    store.batch([PutOp(("alice", "prefs"), "b", None)])
    assert store.get(("alice", "prefs"), "a") is None and store.get(("alice", "prefs"), "b") is None
    assert hub.list_memories(user_id="alice").items == []


def test_content_is_the_index_fields_text(store, hub):
    store.put(("alice", "notes"), "n1", {"text": "Alice's cat is called Miso.", "tags": ["pets"]}, index=["text"])
    [memory] = hub.list_memories(user_id="alice").items
    assert memory.content == "Alice's cat is called Miso."
    assert memory.metadata["langgraph"] == {
        "namespace": ["alice", "notes"],
        "key": "n1",
        "value": {"text": "Alice's cat is called Miso.", "tags": ["pets"]},
    }


def test_search_without_a_query_filters_by_prefix_and_value_newest_first(store, hub):
    for n in range(4):
        store.put(("alice", "tasks", "open" if n % 2 else "done"), f"t{n}", {"text": f"Task {n}.", "n": n})
    hub.create_memory(user_id="alice", content="A memory not written through the store.")
    everything = store.search(("alice",), limit=10)
    assert [i.key for i in everything] == ["t3", "t2", "t1", "t0"] and everything[0].score is None
    assert [i.key for i in store.search(("alice", "tasks", "open"))] == ["t3", "t1"]
    assert [i.key for i in store.search(("alice",), filter={"n": {"$gte": 1, "$lt": 3}})] == ["t2", "t1"]
    assert [i.key for i in store.search(("alice",), filter={"n": 0})] == ["t0"]
    assert [i.key for i in store.search(("alice",), limit=2, offset=1)] == ["t2", "t1"]


def test_search_with_a_query_is_memoryhub_retrieval_with_scores(store):
    store.put(("alice", "facts"), "allergy", {"text": "Alice is allergic to peanuts."})
    store.put(("alice", "facts"), "city", {"text": "Alice lives in Lisbon."})
    store.put(("alice", "other"), "food", {"text": "Alice cooks peanut noodles."})
    found = store.search(("alice", "facts"), query="does alice have a peanut allergy?", limit=5)
    assert found[0].key == "allergy" and 0 < found[0].score <= 1
    assert all(i.namespace == ("alice", "facts") for i in found)


def test_list_namespaces_by_prefix_suffix_and_depth(store):
    for namespace in [("alice", "a", "x"), ("alice", "a", "y"), ("alice", "b", "x"), ("alice", "b")]:
        store.put(namespace, "k", {"text": f"Item in {'/'.join(namespace)}."})
    assert store.list_namespaces(prefix=("alice",)) == [
        ("alice", "a", "x"),
        ("alice", "a", "y"),
        ("alice", "b"),
        ("alice", "b", "x"),
    ]
    assert store.list_namespaces(prefix=("alice", "*"), suffix=("x",)) == [("alice", "a", "x"), ("alice", "b", "x")]
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == [("alice", "a"), ("alice", "b")]
    assert store.list_namespaces(prefix=("alice",), limit=1, offset=1) == [("alice", "a", "y")]


def test_two_users_never_see_each_others_items(store, hub):
    store.put(("alice", "secrets"), "plan", {"text": "Alice plans a surprise party for Bob."})
    store.put(("bob", "secrets"), "plan", {"text": "Bob plans a trip to Porto."})
    # Alice's memory claiming a place in Bob's namespace: the namespace names the user, not the metadata.
    forged = {"namespace": ["bob", "secrets"], "key": "forged", "value": {"text": "Forged by Alice."}}
    hub.create_memory(user_id="alice", content="Bob plans a surprise party.", metadata={"langgraph": forged})
    assert [m.content for m in hub.list_memories(user_id="bob").items] == ['{"text": "Bob plans a trip to Porto."}']
    assert store.get(("bob", "secrets"), "forged") is None
    assert [i.value["text"] for i in store.search(("bob",))] == ["Bob plans a trip to Porto."]
    assert [i.key for i in store.search(("bob",), query="surprise party")] in ([], ["plan"])
    assert store.list_namespaces(prefix=("bob",)) == [("bob", "secrets")]
    store.delete(("bob", "secrets"), "plan")
    assert store.get(("alice", "secrets"), "plan") is not None


def test_the_user_label_can_sit_anywhere_in_the_namespace(hub):
    store = MemoryHubStore(hub, user_position=1)
    store.put(("memories", "alice"), "k", {"text": "Alice speaks Portuguese."})
    assert hub.list_memories(user_id="alice").items[0].metadata["langgraph"]["key"] == "k"
    assert store.list_namespaces(prefix=("memories", "alice")) == [("memories", "alice")]


def test_what_does_not_map_is_refused_clearly(store):
    with pytest.raises(InvalidNamespaceError, match="names no MemoryHub user"):
        store.search(())
    with pytest.raises(InvalidNamespaceError, match="names no MemoryHub user"):
        store.list_namespaces(prefix=("*", "prefs"))
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("alice", "prefs"), "k", {"text": "x"}, ttl=5)
    with pytest.raises(NotImplementedError, match="TTL"):
        store.batch([PutOp(("alice", "prefs"), "k", {"text": "x"}, ttl=5)])


def test_a_search_over_the_retrieval_rate_limit_raises_instead_of_answering_nothing(store, project):
    Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=1)
    store.put(("carol", "facts"), "k", {"text": "Carol plays the cello."})
    assert store.search(("carol",), query="cello")[0].key == "k"
    with pytest.raises(RateLimited):
        store.search(("carol",), query="which instrument?")


def test_the_async_methods_run_on_the_async_client(server, key):
    async def scenario() -> None:
        async with AsyncMemoryHub(base_url=server, api_key=key) as ahub:
            store = MemoryHubStore(ahub)
            await store.aput(("dana", "prefs"), "editor", {"text": "Dana edits in Helix."})
            await store.aput(("dana", "prefs"), "editor", {"text": "Dana moved to Neovim."})
            assert (await store.aget(("dana", "prefs"), "editor")).value == {"text": "Dana moved to Neovim."}
            assert [i.key for i in await store.asearch(("dana",), query="which editor does Dana use?")] == ["editor"]
            assert await store.alist_namespaces(prefix=("dana",)) == [("dana", "prefs")]
            await store.adelete(("dana", "prefs"), "editor")
            assert await store.aget(("dana", "prefs"), "editor") is None

    asyncio.run(scenario())


class Turn(TypedDict):
    message: str
    recalled: list[str]


@dataclass
class User:
    user_id: str


def remember_and_recall(state: Turn, runtime: Runtime[User]) -> dict[str, list[str]]:
    namespace = (runtime.context.user_id, "memories")
    found = runtime.store.search(namespace, query=state["message"], limit=3)
    if state["message"].startswith("remember: "):
        fact = state["message"].removeprefix("remember: ")
        runtime.store.put(namespace, f"fact-{len(runtime.store.search(namespace))}", {"text": fact})
    return {"recalled": [item.value["text"] for item in found]}


def test_a_langgraph_graph_writes_memory_in_one_run_and_reads_it_in_the_next(store, hub):
    builder = StateGraph(Turn, context_schema=User)
    builder.add_node("memory", remember_and_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    graph = builder.compile(store=store)
    first = graph.invoke({"message": "remember: Erin's dog is a greyhound named Pixel."}, context=User("erin"))
    assert first["recalled"] == []
    second = graph.invoke({"message": "what is the name of Erin's dog?", "recalled": []}, context=User("erin"))
    assert second["recalled"] == ["Erin's dog is a greyhound named Pixel."]
    stranger = graph.invoke({"message": "what is the name of Erin's dog?", "recalled": []}, context=User("frank"))
    assert stranger["recalled"] == [] and hub.list_memories(user_id="frank").items == []

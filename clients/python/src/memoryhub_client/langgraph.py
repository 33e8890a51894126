"""LangGraph long-term memory on MemoryHub: ``MemoryHubStore`` is a LangGraph ``BaseStore``.

Install with the ``langgraph`` extra (``pip install "memoryhub-client[langgraph]"``) and compile
a graph with ``store=MemoryHubStore(MemoryHub(...))``. How LangGraph's items map onto memories:

- One label of every namespace is the MemoryHub end user (``user_id``): the first by default
  (``("alice", "memories")``), ``user_position=`` picks another. A namespace, a search prefix or a
  ``list_namespaces`` prefix without that label is refused: MemoryHub reads one user at a time,
  so no call can reach across users.
- An item is one active memory. Its ``content`` is the text at the item's index fields (the
  ``index`` argument of ``put``, else the store's ``fields``; the whole value as JSON by default),
  which MemoryHub embeds and searches; its metadata (``metadata["langgraph"]``) holds the full
  namespace, the key, the value as given and when the key was first written.
- ``put`` of a key that exists supersedes its memory (the history keeps every version);
  ``put(..., None)`` and ``delete`` soft-delete it. ``search`` with a ``query`` is MemoryHub's
  retrieval (``POST /retrieve``: hybrid search, relevance scores in [0, 1], the server's relevance
  cut unless ``min_score`` is given); without one, the namespace's items newest first.
- Not supported: TTLs (``NotImplementedError``; MemoryHub memories expire by ``expires_at`` only),
  ``index=False`` (every memory is embedded, so the item stays searchable), the ``langgraph``
  root label (refused by LangGraph itself). Values live in metadata, so a value is at most 16 KiB
  as JSON (``PayloadTooLarge`` otherwise).

Both clients work: a ``MemoryHub`` serves ``batch`` (and the sync methods), an
``AsyncMemoryHub`` serves ``abatch``; pass one or both. Every operation below is written once,
as a generator of client calls, and each of the two methods drives it with its own client.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from memoryhub_client.aio import AsyncMemoryHub
from memoryhub_client.client import MemoryHub
from memoryhub_client.errors import Conflict, MemoryHubError, NotFound, RateLimited
from memoryhub_client.models import Memory

T = TypeVar("T")
Call = tuple[str, dict[str, Any]]  # a client method's name and its keyword arguments
Plan = Generator[Call, Any, T]
Address = tuple[tuple[str, ...], str]  # (namespace, key)

METADATA_KEY = "langgraph"
PAGE = 200  # GET /memories' largest page
RETRIEVE_LIMIT = 100  # /retrieve's largest limit
RETRIEVE_BUDGET = 100_000  # /retrieve's largest token budget: the packed block never drops a hit


class MemoryHubStore(BaseStore):
    """A LangGraph store whose items are MemoryHub memories (see the module's docstring)."""

    supports_ttl = False

    def __init__(
        self,
        *clients: MemoryHub | AsyncMemoryHub,
        user_position: int = 0,
        fields: Sequence[str] = ("$",),
        kind: str | None = None,
        category: str | None = None,
        min_score: float | None = None,
    ) -> None:
        self.hub = next((c for c in clients if isinstance(c, MemoryHub)), None)
        self.ahub = next((c for c in clients if isinstance(c, AsyncMemoryHub)), None)
        if not clients or len(clients) > 2 or any(not isinstance(c, MemoryHub | AsyncMemoryHub) for c in clients):
            raise TypeError("MemoryHubStore takes a MemoryHub, an AsyncMemoryHub or one of each")
        self.user_position = user_position
        self.fields = list(fields)
        self.kind = kind
        self.category = category
        self.min_score = min_score

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order with the sync client, each seeing the writes before it."""
        if self.hub is None:
            raise TypeError("this MemoryHubStore has no MemoryHub (sync) client; use the async methods")
        plan = _Batch(self).run(list(ops))
        answer: Any = None
        error: MemoryHubError | None = None
        while True:
            try:
                name, arguments = plan.throw(error) if error else plan.send(answer)
            except StopIteration as done:
                return list(done.value)
            try:
                answer, error = getattr(self.hub, name)(**arguments), None
            except MemoryHubError as failure:
                answer, error = None, failure

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order with the async client, each seeing the writes before it."""
        if self.ahub is None:
            raise TypeError("this MemoryHubStore has no AsyncMemoryHub client; use the sync methods")
        plan = _Batch(self).run(list(ops))
        answer: Any = None
        error: MemoryHubError | None = None
        while True:
            try:
                name, arguments = plan.throw(error) if error else plan.send(answer)
            except StopIteration as done:
                return list(done.value)
            try:
                answer, error = await getattr(self.ahub, name)(**arguments), None
            except MemoryHubError as failure:
                answer, error = None, failure

    def user_of(self, namespace: tuple[str, ...]) -> str:
        """The MemoryHub user a namespace (or a prefix of one) belongs to."""
        if len(namespace) <= self.user_position or namespace[self.user_position] == "*":
            raise InvalidNamespaceError(
                f"{namespace} names no MemoryHub user: label {self.user_position} of a namespace is its "
                "user_id, and MemoryHub reads one user at a time"
            )
        return namespace[self.user_position]


class _Batch:
    """One batch: each user's items are read once (every page of their active memories), when
    an operation first needs them, and kept up to date by the batch's own writes."""

    def __init__(self, store: MemoryHubStore) -> None:
        self.store = store
        # Newest first; more than one memory per address only after concurrent first writes.
        self.users: dict[str, dict[Address, list[Memory]]] = {}

    def run(self, ops: list[Op]) -> Plan[list[Result]]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self.get(op)))
            elif isinstance(op, PutOp):
                yield from self.put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self.search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self.list_namespaces(op)))
            else:
                raise TypeError(f"unknown store operation {op!r}")
        return results

    def items_of(self, user: str) -> Plan[dict[Address, list[Memory]]]:
        if user not in self.users:
            found: dict[Address, list[Memory]] = {}
            cursor = None
            while True:
                page = yield ("list_memories", {"user_id": user, "status": "active", "limit": PAGE, "cursor": cursor})
                for memory in page.items:
                    address = _address(memory)
                    if address is not None:
                        found.setdefault(address, []).append(memory)
                cursor = page.next_cursor
                if not cursor:
                    break
            self.users[user] = found
        return self.users[user]

    def get(self, op: GetOp) -> Plan[Item | None]:
        items = yield from self.items_of(self.store.user_of(op.namespace))
        versions = items.get((op.namespace, op.key))
        return _item(versions[0]) if versions else None

    def put(self, op: PutOp) -> Plan[None]:
        if op.ttl is not None:
            raise NotImplementedError("MemoryHubStore does not support TTLs (put with ttl=None)")
        user = self.store.user_of(op.namespace)
        items = yield from self.items_of(user)
        address = (op.namespace, op.key)
        versions = items.pop(address, [])
        if op.value is None:
            for memory in versions:
                yield from _forget(memory)
            return
        written = yield from self.write(op, user, versions)
        self.users[user][address] = [written]  # write() may have re-read the user's items

    def write(self, op: PutOp, user: str, versions: list[Memory]) -> Plan[Memory]:
        value = dict(op.value or {})
        entry: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key, "value": value}
        body: dict[str, Any] = {
            "user_id": user,
            "content": self.content(value, op.index),
            "metadata": {METADATA_KEY: entry},
            "kind": self.store.kind,
            "category": self.store.category,
        }
        written: Memory
        if not versions:
            written = yield ("create_memory", body)
            return written
        # A key's creation time is its first version's, carried along every supersede.
        entry["created_at"] = _item(versions[0]).created_at.isoformat()
        try:
            written = yield ("supersede_memory", {"memory_id": versions[0].id, **body, "reason": "LangGraph put"})
        except Conflict:
            # Another writer superseded it since this batch read it: supersede the newest.
            self.users.pop(user, None)
            items = yield from self.items_of(user)
            versions = items.pop((op.namespace, op.key), [])
            if not versions:
                written = yield ("create_memory", body)
                return written
            written = yield ("supersede_memory", {"memory_id": versions[0].id, **body, "reason": "LangGraph put"})
        for duplicate in versions[1:]:
            yield from _forget(duplicate)
        return written

    def content(self, value: dict[str, Any], index: Any) -> str:
        paths = index if isinstance(index, list) else self.store.fields
        texts = [text for path in paths for text in get_text_at_path(value, path) if text.strip()]
        return "\n".join(texts) or json.dumps(value, sort_keys=True, ensure_ascii=False)

    def search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        user = self.store.user_of(op.namespace_prefix)
        if op.query:
            return (yield from self.retrieve(op, user))
        items = yield from self.items_of(user)
        newest = sorted((v[0] for v in items.values()), key=lambda m: (m.updated_at, m.id), reverse=True)
        hits = [_item(m) for m in newest if _matches(_item(m), op)]
        return [_search_item(item, None) for item in hits[op.offset : op.offset + op.limit]]

    def retrieve(self, op: SearchOp, user: str) -> Plan[list[SearchItem]]:
        arguments: dict[str, Any] = {
            "user_id": user,
            "query": op.query,
            "limit": RETRIEVE_LIMIT,
            "token_budget": RETRIEVE_BUDGET,
            "min_score": self.store.min_score,
            "kinds": [self.store.kind] if self.store.kind else None,
            "hop_depth": 0,  # linked neighbours are not answers to the query
            "episodes": False,  # raw messages are not store items
        }
        found = yield ("retrieve", arguments)
        if "rate_limited" in found.degraded:
            # The server degrades to an empty answer instead of failing; an empty search would lie.
            raise RateLimited("retrievals over the project's per-user limit", code="rate_limited", status=429)
        seen: set[Address] = set()
        hits: list[SearchItem] = []
        for memory in found.memories:
            address = _address(memory)
            if address is None or address in seen:
                continue
            seen.add(address)
            item = _item(memory)
            if _matches(item, op):
                hits.append(_search_item(item, memory.score))
        return hits[op.offset : op.offset + op.limit]

    def list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        conditions = op.match_conditions or ()
        prefix = next((c.path for c in conditions if c.match_type == "prefix"), ())
        items = yield from self.items_of(self.store.user_of(tuple(prefix)))
        namespaces = {ns for ns, _ in items if all(_namespace_matches(c, ns) for c in conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _forget(memory: Memory) -> Plan[None]:
    with contextlib.suppress(NotFound):  # already gone: what was asked
        yield ("delete_memory", {"memory_id": memory.id, "user_id": memory.user_id})


def _entry(memory: Memory) -> dict[str, Any]:
    entry = memory.metadata.get(METADATA_KEY)
    return entry if isinstance(entry, dict) else {}


def _address(memory: Memory) -> Address | None:
    """Where a memory sits in the store; None for memories written otherwise (capture, the UI...)."""
    entry = _entry(memory)
    namespace, key = entry.get("namespace"), entry.get("key")
    if not isinstance(namespace, list) or not isinstance(key, str) or not isinstance(entry.get("value"), dict):
        return None
    return tuple(str(label) for label in namespace), key


def _item(memory: Memory) -> Item:
    entry = _entry(memory)
    created = entry.get("created_at")
    return Item(
        value=entry["value"],
        key=entry["key"],
        namespace=tuple(entry["namespace"]),
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else memory.created_at,
        updated_at=memory.updated_at,
    )


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


def _matches(item: Item, op: SearchOp) -> bool:
    prefix = op.namespace_prefix
    if item.namespace[: len(prefix)] != prefix:
        return False
    return all(_value_matches(item.value.get(name), wanted) for name, wanted in (op.filter or {}).items())


OPERATORS = {
    "$eq": lambda have, want: have == want,
    "$ne": lambda have, want: have != want,
    "$gt": lambda have, want: have > want,
    "$gte": lambda have, want: have >= want,
    "$lt": lambda have, want: have < want,
    "$lte": lambda have, want: have <= want,
}


def _value_matches(have: Any, wanted: Any) -> bool:
    """LangGraph's filter: equality, nested objects field by field, or ``{"$op": value}``."""
    if isinstance(wanted, dict) and any(name.startswith("$") for name in wanted):
        for name, operand in wanted.items():
            if name not in OPERATORS:
                raise ValueError(f"unsupported filter operator {name!r} (supported: {', '.join(OPERATORS)})")
            try:
                if not OPERATORS[name](have, operand):
                    return False
            except TypeError:  # e.g. a missing field compared with a number
                return False
        return True
    if isinstance(wanted, dict):
        return isinstance(have, dict) and all(_value_matches(have.get(k), v) for k, v in wanted.items())
    return bool(have == wanted)


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want in ("*", have) for have, want in zip(labels, path, strict=True))

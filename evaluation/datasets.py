"""Evaluation datasets in one in-memory form: a corpus of memories and the cases that query it.

Two sources are supported:

* LoCoMo as flattened by the shared benchmark converter (``*_corpus.jsonl`` +
  ``*_retrieval.jsonl``). The data is CC BY-NC evaluation data: it is read from a path given
  at run time and never copied into this repository.
* MemoryHub's own golden set (``evaluation/data/golden.jsonl`` + ``evaluation/data/golden_memories.jsonl``), whose
  format is documented in ``evaluation/data/README.md``.

Nothing here imports Django or touches a database; a runner turns a ``Dataset`` into API or
service calls and the answers into ``CaseResult`` objects with ``Dataset.result_for``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evaluation.metrics import CaseResult

GOLDEN_CATEGORIES: tuple[str, ...] = (
    "paraphrase",
    "keyword",
    "conversational",
    "negative",
    "cross_user",
    "supersede",
    "graph_hop",
)
MEMORY_KINDS: tuple[str, ...] = ("fact", "preference", "decision", "note")
MEMORY_SCOPES: tuple[str, ...] = ("user", "project")
EDGE_RELATIONSHIPS: tuple[str, ...] = ("related", "refines", "contradicts", "supersedes", "derived_from")
GOLDEN_MEMORIES_FILENAME = "golden_memories.jsonl"


class DatasetError(ValueError):
    """A dataset file is malformed or internally inconsistent (message names file and line)."""


@dataclass(frozen=True)
class Link:
    """A typed edge from the memory that carries it to the memory ``to``."""

    to: str
    relationship: str


@dataclass(frozen=True)
class CorpusItem:
    """One memory to store before the cases run.

    ``supersedes`` names the id this memory replaces (store the older one first, then
    supersede it); ``links`` are edges to create once every memory exists. LoCoMo extras
    (speaker, session, timestamp, dia_id…) are kept in ``metadata``.
    """

    id: str
    user_id: str
    text: str
    scope: str = "user"
    kind: str | None = None
    category: str | None = None
    supersedes: str | None = None
    links: tuple[Link, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation window (``role`` is ``user`` or ``assistant``)."""

    role: str
    content: str


@dataclass(frozen=True)
class Case:
    """One retrieval question.

    ``query`` is always set: for a conversational case it is the last user message, so an
    engine that only takes a query can still run it; ``messages`` holds the whole window.
    ``negative`` means the right answer is "nothing" (``relevant_ids`` is then empty on
    purpose); ``forbidden_ids`` must never be returned for this case.
    """

    id: str
    user_id: str
    query: str
    category: str
    relevant_ids: tuple[str, ...]
    negative: bool = False
    messages: tuple[ChatMessage, ...] = ()
    forbidden_ids: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Dataset:
    """A corpus and its cases; ``skipped`` lists case ids dropped at load time (no labels)."""

    name: str
    corpus: list[CorpusItem]
    cases: list[Case]
    skipped: list[str] = field(default_factory=list)

    @cached_property
    def items_by_id(self) -> dict[str, CorpusItem]:
        """Corpus items by id (computed once: treat the corpus as read-only after loading)."""
        return {item.id: item for item in self.corpus}

    def leaked_ids(self, user_id: str, returned_ids: Sequence[str]) -> list[str]:
        """Returned ids that are another user's ``user``-scope memories.

        Project-scope memories are visible to everyone and ids unknown to the corpus have no
        known owner, so neither counts as a leak.
        """
        leaks: list[str] = []
        for memory_id in dict.fromkeys(returned_ids):
            item = self.items_by_id.get(memory_id)
            if item is not None and item.scope == "user" and item.user_id != user_id:
                leaks.append(memory_id)
        return leaks

    def result_for(
        self,
        case: Case,
        ranked_ids: Sequence[str],
        *,
        latency_ms: float | None = None,
        token_count: int | None = None,
        token_budget: int | None = None,
    ) -> CaseResult:
        """Score-ready result of one case from the ids the engine returned, best first."""
        return CaseResult(
            case_id=case.id,
            category=case.category,
            ranked_ids=tuple(ranked_ids),
            relevant_ids=frozenset(case.relevant_ids),
            negative=case.negative,
            latency_ms=latency_ms,
            token_count=token_count,
            token_budget=token_budget,
            leaked_ids=tuple(self.leaked_ids(case.user_id, ranked_ids)),
            forbidden_ids=frozenset(case.forbidden_ids),
        )


# --- reading helpers ---------------------------------------------------------------------


def _read_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``("file:line", record)`` for every non-blank line, failing loudly on bad JSON."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: invalid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield where, record


def _text(record: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _required_text(record: Mapping[str, Any], key: str, where: str) -> str:
    value = _text(record, key, where)
    assert value is not None  # _text raises instead of returning None when required
    return value


def _str_list(record: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: field {key!r} must be a list of strings")
    return tuple(value)


# --- LoCoMo ------------------------------------------------------------------------------

_LOCOMO_ITEM_FIELDS = {"id", "user_id", "text"}


def _locomo_item(record: Mapping[str, Any], where: str) -> CorpusItem:
    metadata = {key: value for key, value in record.items() if key not in _LOCOMO_ITEM_FIELDS}
    return CorpusItem(
        id=_required_text(record, "id", where),
        user_id=_required_text(record, "user_id", where),
        text=_required_text(record, "text", where),
        metadata=metadata,
    )


def _category_selected(record: Mapping[str, Any], categories: Collection[str] | None) -> bool:
    # Accept either the name ("temporal") or the LoCoMo number (2 or "2"): both are in use.
    if categories is None:
        return True
    return str(record.get("category_name")) in categories or str(record.get("category")) in categories


def _locomo_case(record: Mapping[str, Any], where: str) -> Case:
    keep = ("dataset", "conversation_id", "answer", "adversarial_answer", "evidence_dia_ids")
    metadata = {key: record.get(key) for key in keep}
    metadata["category_number"] = record.get("category")
    return Case(
        id=_required_text(record, "question_id", where),
        user_id=_required_text(record, "user_id", where),
        query=_required_text(record, "question", where),
        category=_required_text(record, "category_name", where),
        relevant_ids=_str_list(record, "relevant_ids", where),
        metadata=metadata,
    )


def _load_locomo_cases(
    cases_path: Path, categories: Collection[str] | None, limit: int | None
) -> tuple[list[Case], list[str], str]:
    cases: list[Case] = []
    skipped: list[str] = []
    name = cases_path.stem
    for where, record in _read_jsonl(cases_path):
        name = str(record.get("dataset") or name)
        if not _category_selected(record, categories):
            continue
        case = _locomo_case(record, where)
        if not case.relevant_ids:
            # README: an empty relevant_ids means "no usable label", not "nothing relevant".
            skipped.append(case.id)
            continue
        if limit is not None and len(cases) >= limit:
            break
        cases.append(case)
    return cases, skipped, name


def load_locomo(
    corpus_path: str | Path,
    cases_path: str | Path,
    *,
    categories: Collection[str | int] | None = None,
    limit: int | None = None,
    restrict_corpus: bool = False,
) -> Dataset:
    """Load a flattened LoCoMo variant (turn, observation or session corpus + its cases).

    ``categories`` keeps only those categories, by name or LoCoMo number; ``limit`` keeps the
    first N usable cases in file order. Cases without relevant ids are skipped (their ids are
    in ``Dataset.skipped``) as the benchmark README prescribes; they are never negatives.
    The whole corpus is kept by default so other users' memories stay in the store and
    cross-user leaks stay measurable; ``restrict_corpus`` keeps only the cases' users.
    Raises ``DatasetError`` when a relevant id is missing from the corpus (mismatched files).
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    wanted = None if categories is None else {str(c) for c in categories}
    cases, skipped, name = _load_locomo_cases(Path(cases_path), wanted, limit)
    corpus = [_locomo_item(record, where) for where, record in _read_jsonl(Path(corpus_path))]
    if restrict_corpus:
        users = {case.user_id for case in cases}
        corpus = [item for item in corpus if item.user_id in users]
    dataset = Dataset(name=name, corpus=corpus, cases=cases, skipped=skipped)
    _check_relevant_ids_exist(dataset, str(cases_path))
    return dataset


def _check_relevant_ids_exist(dataset: Dataset, source: str) -> None:
    known = dataset.items_by_id
    for case in dataset.cases:
        missing = [memory_id for memory_id in case.relevant_ids if memory_id not in known]
        if missing:
            raise DatasetError(f"{source}: case {case.id} names ids missing from the corpus: {missing[:5]}")


# --- golden set --------------------------------------------------------------------------


def _golden_links(record: Mapping[str, Any], where: str) -> tuple[Link, ...]:
    raw = record.get("links", [])
    if not isinstance(raw, list):
        raise DatasetError(f"{where}: field 'links' must be a list")
    links: list[Link] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise DatasetError(f"{where}: every link must be an object with to_key and relationship")
        relationship = _required_text(entry, "relationship", where)
        if relationship not in EDGE_RELATIONSHIPS:
            raise DatasetError(f"{where}: unknown relationship {relationship!r}")
        links.append(Link(to=_required_text(entry, "to_key", where), relationship=relationship))
    return tuple(links)


def _golden_memory(record: Mapping[str, Any], where: str) -> CorpusItem:
    kind = _required_text(record, "kind", where)
    scope = _text(record, "scope", where, required=False) or "user"
    if kind not in MEMORY_KINDS:
        raise DatasetError(f"{where}: unknown kind {kind!r}")
    if scope not in MEMORY_SCOPES:
        raise DatasetError(f"{where}: unknown scope {scope!r}")
    known = {"key", "user_id", "content", "kind", "category", "scope", "supersedes_key", "links"}
    return CorpusItem(
        id=_required_text(record, "key", where),
        user_id=_required_text(record, "user_id", where),
        text=_required_text(record, "content", where),
        scope=scope,
        kind=kind,
        category=_required_text(record, "category", where),
        supersedes=_text(record, "supersedes_key", where, required=False),
        links=_golden_links(record, where),
        metadata={key: value for key, value in record.items() if key not in known},
    )


def _golden_messages(record: Mapping[str, Any], where: str) -> tuple[ChatMessage, ...]:
    raw = record.get("messages", [])
    if not isinstance(raw, list):
        raise DatasetError(f"{where}: field 'messages' must be a list")
    messages: list[ChatMessage] = []
    for entry in raw:
        if not isinstance(entry, dict) or entry.get("role") not in ("user", "assistant"):
            raise DatasetError(f"{where}: every message needs role 'user' or 'assistant' and content")
        messages.append(ChatMessage(role=entry["role"], content=_required_text(entry, "content", where)))
    return tuple(messages)


def _golden_query(record: Mapping[str, Any], messages: Sequence[ChatMessage], where: str) -> str:
    query = _text(record, "query", where, required=False)
    if query is not None:
        return query
    user_turns = [m.content for m in messages if m.role == "user"]
    if not user_turns:
        raise DatasetError(f"{where}: a case needs a 'query' or 'messages' with a user message")
    return user_turns[-1]


def _golden_case(record: Mapping[str, Any], where: str) -> Case:
    category = _required_text(record, "category", where)
    if category not in GOLDEN_CATEGORIES:
        raise DatasetError(f"{where}: unknown category {category!r}")
    messages = _golden_messages(record, where)
    expected = _str_list(record, "expected_retrievals", where)
    known = {"id", "category", "user_id", "setup_memories", "query", "messages"}
    known |= {"expected_retrievals", "forbidden_retrievals"}
    return Case(
        id=_required_text(record, "id", where),
        user_id=_required_text(record, "user_id", where),
        query=_golden_query(record, messages, where),
        category=category,
        relevant_ids=expected,
        # In the golden set an empty expectation is a label ("nothing relevant"), not a gap.
        negative=not expected,
        messages=messages,
        forbidden_ids=_str_list(record, "forbidden_retrievals", where),
        metadata={key: value for key, value in record.items() if key not in known},
    )


def _add_memory(memories: dict[str, CorpusItem], item: CorpusItem, where: str) -> None:
    existing = memories.get(item.id)
    if existing is not None and existing != item:
        raise DatasetError(f"{where}: memory key {item.id!r} is defined twice with different content")
    memories[item.id] = item


def _inline_memories(record: Mapping[str, Any], where: str) -> list[CorpusItem]:
    raw = record.get("setup_memories", [])
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise DatasetError(f"{where}: field 'setup_memories' must be a list of memory objects")
    return [_golden_memory(entry, where) for entry in raw]


def _check_golden_references(dataset: Dataset, source: str) -> None:
    known = dataset.items_by_id
    position = {item.id: index for index, item in enumerate(dataset.corpus)}
    for item in dataset.corpus:
        targets = [link.to for link in item.links] + ([item.supersedes] if item.supersedes else [])
        missing = [key for key in targets if key not in known]
        if missing:
            raise DatasetError(f"{source}: memory {item.id!r} points at unknown keys {missing}")
        # A runner stores memories in order and supersedes as it goes: the old one must exist.
        if item.supersedes and position[item.supersedes] > position[item.id]:
            raise DatasetError(f"{source}: memory {item.id!r} supersedes {item.supersedes!r}, defined after it")
    for case in dataset.cases:
        missing = [key for key in (*case.relevant_ids, *case.forbidden_ids) if key not in known]
        if missing:
            raise DatasetError(f"{source}: case {case.id!r} names unknown memory keys {missing}")


def load_golden(path: str | Path, *, memories_path: str | Path | None = None) -> Dataset:
    """Load the golden cases at ``path`` and the shared memories they reference.

    ``memories_path`` defaults to ``golden_memories.jsonl`` next to ``path`` when it exists.
    Memories a case defines inline (``setup_memories``) join the same corpus; a key defined
    twice with different content is an error. Every referenced key must exist.
    """
    cases_file = Path(path)
    shared = Path(memories_path) if memories_path is not None else cases_file.with_name(GOLDEN_MEMORIES_FILENAME)
    memories: dict[str, CorpusItem] = {}
    if memories_path is not None or shared.exists():
        for where, record in _read_jsonl(shared):
            _add_memory(memories, _golden_memory(record, where), where)
    cases: dict[str, Case] = {}
    for where, record in _read_jsonl(cases_file):
        for item in _inline_memories(record, where):
            _add_memory(memories, item, where)
        case = _golden_case(record, where)
        if case.id in cases:
            raise DatasetError(f"{where}: duplicate case id {case.id!r}")
        cases[case.id] = case
    dataset = Dataset(name=cases_file.stem, corpus=list(memories.values()), cases=list(cases.values()))
    _check_golden_references(dataset, str(cases_file))
    return dataset

"""What the API answers, as frozen dataclasses named after the API's ``*Out`` schemas.

Field names are the JSON names, so ``contract.check_schema`` can compare every model with the
OpenAPI schema field by field. Timestamps become ``datetime``; nested objects become their
dataclasses; free-form JSON (``metadata``, ``source``, scratchpad values) stays as parsed.
Fields the server adds later are ignored when decoding (an older client keeps working),
and the contract test fails until the model has them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")

CAPTURE_DONE = frozenset({"done", "failed", "coalesced"})


@dataclass(frozen=True)
class Link:
    """A typed link from one memory to another (``related`` in and out)."""

    id: str
    relationship: str = "related"


@dataclass(frozen=True)
class Memory:
    """One memory, as ``MemoryOut`` of docs/api.md."""

    id: str
    user_id: str
    scope: str
    kind: str
    category: str
    content: str
    importance: float
    metadata: dict[str, Any]
    status: str
    version: int
    supersedes: str | None
    superseded_by: str | None
    related: list[Link]
    source: dict[str, Any] | None
    embedding_status: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class MemoryWrite(Memory):
    """A create or supersede answer: the memory, whether this request stored it (``created``;
    False: ``duplicate_of`` names the active memory it repeats), and what is searchable now."""

    created: bool = True
    duplicate_of: str | None = None
    indexing: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryPage:
    """One page of ``GET /memories``; ``next_cursor`` is None on the last page."""

    items: list[Memory]
    next_cursor: str | None


@dataclass(frozen=True)
class BulkResult:
    """The ids ``POST /memories/bulk`` created, in the order sent."""

    ids: list[str]
    # What is searchable now: {keyword, vector, pending} (older servers send none).
    indexing: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Revision:
    """One recorded change of a memory."""

    id: int
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    actor: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class History:
    """Every edit of a memory, and its supersede chain oldest to newest."""

    revisions: list[Revision]
    chain: list[Memory]


@dataclass(frozen=True)
class RetrievedMemory(Memory):
    """A memory as ``/retrieve`` returns it: with its score, how it matched and older versions."""

    score: float
    matched_by: list[str]
    chain: list[Memory]


@dataclass(frozen=True)
class Episode:
    """Something the user said, found beside the memories (``/retrieve``'s ``episodes``)."""

    id: str
    conversation_id: str
    session_id: str
    role: str
    content: str
    context: str
    said_at: datetime
    correlation_id: str
    score: float
    matched_by: list[str]


@dataclass(frozen=True)
class RetrieveResult:
    """The answer of ``POST /retrieve``: memories and episodes by descending score, and the injection text."""

    memories: list[RetrievedMemory]
    injection: str
    token_count: int
    truncated: bool
    cached: bool
    degraded: list[str]
    hypotheses: list[str]
    timings_ms: dict[str, float]
    correlation_id: str
    # The user's own messages that answer too (older servers send none).
    episodes: list[Episode] = field(default_factory=list)
    # The part of the user's profile that starts the injection (None: none was injected).
    profile: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolMemory:
    """One memory in the ``query_memory`` tool's compact shape."""

    content: str
    type: str
    relevance: float
    context: str


@dataclass(frozen=True)
class QueryMemoryMeta:
    count: int
    truncated: bool
    by_category: dict[str, int]
    # "rate_limited" when the user's limit was reached (no memories then), as RetrieveResult.degraded.
    degraded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class QueryMemoryResult:
    """The answer of ``POST /tools/query_memory``."""

    memories: list[ToolMemory]
    metadata: QueryMemoryMeta


@dataclass(frozen=True)
class JobAccepted:
    """A background job the API accepted (``202``)."""

    job_id: str
    status: str


@dataclass(frozen=True)
class CaptureItem:
    """One candidate memory a capture job extracted, and what became of it."""

    content: str
    kind: str
    category: str
    scope: str
    confidence: float
    outcome: str
    memory_id: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class CaptureJob:
    """A capture job's state; ``finished`` once it is done, failed or coalesced."""

    job_id: str
    status: str
    trigger: str
    user_id: str
    session_id: str
    conversation_id: str | None
    memory_ids: list[str]
    error: str | None
    attempts: int
    coalesced_into: str | None
    extractor: str | None
    items: list[CaptureItem]
    rejected: list[dict[str, Any]]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    note: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in CAPTURE_DONE


@dataclass(frozen=True)
class ScratchpadEntry:
    """One key of a user's scratchpad."""

    key: str
    value: Any
    updated_at: datetime
    expires_at: datetime | None = None


@dataclass(frozen=True)
class ScratchpadList:
    items: list[ScratchpadEntry]


@dataclass(frozen=True)
class ConsolidationCounts:
    """What a consolidation did: merges and supersedes applied, proposals left for review,
    close pairs judged distinct; observations written, left for review, and the groups of
    related memories the LLM was asked about. The observation counts default to 0 so this client
    still reads a server from before them (it wrote none)."""

    merged: int
    superseded: int
    kept: int
    proposed: int
    observed: int = 0
    observations_proposed: int = 0
    observation_groups: int = 0


@dataclass(frozen=True)
class ConsolidationAction:
    """One merge or supersede: ``retired`` stops being current, ``survivor`` stays."""

    id: int
    action: str
    status: str
    survivor_id: str
    retired_id: str
    confidence: float
    reason: str


@dataclass(frozen=True)
class Consolidation:
    """A consolidation run's state; ``finished`` once it is done or failed."""

    job_id: str
    status: str
    user_id: str
    trigger: str
    full: bool
    compared: int
    counts: ConsolidationCounts
    actions: list[ConsolidationAction]
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


@dataclass(frozen=True)
class ProfileFact:
    """One standing fact of a profile, with the memories it rests on (none for a pinned one)."""

    text: str
    memory_ids: list[str]
    pinned: bool


@dataclass(frozen=True)
class Profile:
    """An end user's profile: standing facts from their active memories, versioned."""

    user_id: str
    text: str
    facts: list[ProfileFact]
    version: int
    token_count: int
    updated_at: datetime
    pinned: list[str]
    hidden_memory_ids: list[str]


@dataclass(frozen=True)
class ProfileVersion:
    """One version of a profile: what it held, who made it and why."""

    version: int
    text: str
    pinned: list[str]
    hidden_memory_ids: list[str]
    actor: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class ProfileVersions:
    """A profile's versions, newest first."""

    user_id: str
    versions: list[ProfileVersion]


@dataclass(frozen=True)
class Erasure:
    """What erasing a user removed, per kind."""

    user_id: str
    erased: dict[str, int]


@dataclass(frozen=True)
class ImportCounts:
    memories: int
    revisions: int
    links: int
    conversations: int
    messages: int


@dataclass(frozen=True)
class ImportResult:
    """The answer of ``POST /import`` (a rejected import raises ``ValidationError`` instead)."""

    imported: ImportCounts
    skipped: int
    rejected: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Health:
    status: str
    database: str
    broker: str
    embedder: str
    llm: str


def decode(cls: type[T], data: Any) -> T:
    """Build ``cls`` (a dataclass above) from parsed JSON, converting nested values by type."""
    return typing.cast(T, _convert(cls, data))


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, entry) for entry in value]
    if hint is datetime:
        return datetime.fromisoformat(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        known = {f.name for f in dataclasses.fields(hint)}
        return hint(**{name: _convert(hints[name], raw) for name, raw in value.items() if name in known})
    if hint is float and isinstance(value, int):
        return float(value)
    return value

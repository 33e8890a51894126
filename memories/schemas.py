"""Request and response schemas of the memory endpoints (the contract in docs/api.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, model_validator

UserId = Annotated[str, StringConstraints(min_length=1, max_length=255)]
KindName = Literal["fact", "preference", "decision", "note", "observation"]
ScopeName = Literal["user", "project"]
StatusName = Literal["active", "pending_review", "superseded", "archived", "deleted"]
RelationshipName = Literal["related", "refines", "contradicts", "supersedes", "derived_from", "depends_on"]
Category = Annotated[str, StringConstraints(max_length=100)]

# Every instant Python can read back in any time zone: "9999-12-31T23:00:00-14:00" is year
# 10000 in UTC, which Postgres stores and Python then cannot load (every list of the project
# failed). Checked before writing.
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def _storable(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp out of range (years 1 to 9999 in UTC)") from None
    if not _EARLIEST <= utc <= _LATEST:
        raise ValueError("timestamp out of range (years 1 to 9999 in UTC)")
    return value


StoredDatetime = Annotated[AwareDatetime, AfterValidator(_storable)]


class StrictSchema(Schema):
    # Unknown fields are a client bug worth hearing about (a typo'd "contnet" would
    # otherwise store an empty memory's worth of nothing).
    model_config = ConfigDict(extra="forbid")


class RelatedIn(StrictSchema):
    id: str
    relationship: RelationshipName = "related"


class MemoryFields(StrictSchema):
    content: str
    kind: KindName = "fact"
    category: Category = ""
    importance: float = Field(0.5, ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expires_at: StoredDatetime | None = None
    related: list[RelatedIn] = Field(default_factory=list, max_length=100)


class MemoryIn(MemoryFields):
    user_id: UserId
    scope: ScopeName = "user"
    supersedes: str | None = None


class MemoryListQuery(Schema):
    """The query of GET /memories (and the MCP ``list_memories`` tool)."""

    user_id: UserId
    kind: KindName | None = None
    category: str | None = None
    scope: ScopeName | None = None
    status: StatusName | None = None
    q: str | None = None
    limit: int = Field(50, ge=1, le=200)
    cursor: str | None = None


class BulkMemoryItem(StrictSchema):
    user_id: UserId
    content: str
    kind: KindName = "fact"
    category: Category = ""
    scope: ScopeName = "user"
    importance: float = Field(0.5, ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expires_at: StoredDatetime | None = None


class BulkIn(StrictSchema):
    memories: list[BulkMemoryItem]


class BulkOut(Schema):
    ids: list[str]
    indexing: IndexingOut


class SupersedeIn(MemoryFields):
    user_id: UserId
    scope: ScopeName | None = None
    reason: str = ""


NULLABLE_PATCH_FIELDS = frozenset({"expires_at"})


class MemoryPatch(StrictSchema):
    user_id: UserId
    content: str | None = None
    kind: KindName | None = None
    category: Category | None = None
    importance: float | None = Field(None, ge=0, le=1)
    metadata: dict[str, Any] | None = None
    expires_at: StoredDatetime | None = None
    reason: str = ""

    @model_validator(mode="after")
    def _no_null_values(self) -> MemoryPatch:
        # Leaving a field out keeps it; null only makes sense where "none" is a value.
        nulled = sorted(f for f in self.model_fields_set - NULLABLE_PATCH_FIELDS if getattr(self, f) is None)
        if nulled:
            raise ValueError(f"{', '.join(nulled)} cannot be null; leave a field out to keep it")
        return self


class BodyOut(BaseModel):
    """A response body the view builds as a dict (``memory_out`` and the like), checked by pydantic
    alone.

    ninja's ``Schema`` wraps every object it validates in a ``DjangoGetter``, so that ORM
    instances can be read by attribute. These bodies are dicts already, and the getter nearly
    doubled ninja's work on a ten-memory ``POST /retrieve`` answer: 0.71 ms to validate and render
    it, against 0.38 without. The OpenAPI document and the MCP
    output schemas are the same either way.
    """


class RelatedOut(BodyOut):
    id: str
    relationship: str


class MemoryOut(BodyOut):
    id: str
    user_id: str
    scope: ScopeName
    kind: KindName
    category: str
    content: str
    importance: float
    metadata: dict[str, Any]
    status: StatusName
    version: int
    supersedes: str | None
    superseded_by: str | None
    related: list[RelatedOut]
    source: dict[str, Any] | None
    embedding_status: Literal["ready", "pending", "failed"]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


class IndexingOut(BodyOut):
    """What a write answer says is searchable now: ``keyword`` (full text finds it), ``vector`` (its
    vector is stored, so search by meaning finds it) and what is still being processed."""

    keyword: bool
    vector: bool
    pending: list[Literal["embedding", "profile"]]


class MemoryWriteOut(MemoryOut):
    """The answer of a create or supersede: the memory, whether this request stored it, and what
    is searchable now."""

    created: bool
    duplicate_of: str | None
    indexing: IndexingOut


class MemoryPageOut(BodyOut):
    items: list[MemoryOut]
    next_cursor: str | None


class RevisionOut(Schema):
    id: int
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    actor: str
    reason: str
    created_at: datetime


class HistoryOut(Schema):
    revisions: list[RevisionOut]
    chain: list[MemoryOut]


def indexing_out(memories: list[Any], *, changed: bool, profiles: bool) -> dict[str, Any]:
    """``IndexingOut`` for memories just written (read back as stored). Full text reads a memory's
    words from rows its own insert writes, so an active memory is found by keyword at once; by
    meaning only once its vector is stored. ``changed``: this request wrote something, so the
    user's profile is rebuilt after it (when ``profiles`` are installed)."""
    active = all(m.status == "active" for m in memories)
    embedded = all(m.embedding_status == "ready" for m in memories)
    pending = [] if embedded else ["embedding"]
    if changed and profiles:
        pending.append("profile")
    return {"keyword": active, "vector": active and embedded, "pending": pending}


def memory_write_out(memory: Any, *, created: bool, profiles: bool) -> dict[str, Any]:
    """``MemoryWriteOut``: a stored (``created``) or already present memory."""
    return {
        **memory_out(memory),
        "created": created,
        "duplicate_of": None if created else str(memory.pk),
        "indexing": indexing_out([memory], changed=created, profiles=profiles),
    }


def memory_out(memory: Any) -> dict[str, Any]:
    """The API's memory object. Expects ``with_relations`` prefetches for speed."""
    try:
        successor = memory.superseded_by
    except memory.__class__.superseded_by.RelatedObjectDoesNotExist:
        successor = None
    return {
        "id": str(memory.pk),
        "user_id": memory.user_id,
        "scope": memory.scope,
        "kind": memory.kind,
        "category": memory.category,
        "content": memory.content,
        "importance": memory.importance,
        "metadata": memory.metadata,
        "status": memory.status,
        "version": memory.version,
        "supersedes": str(memory.supersedes_id) if memory.supersedes_id else None,
        "superseded_by": str(successor.pk) if successor else None,
        "related": [
            {"id": str(edge.to_memory_id), "relationship": edge.relationship}
            for edge in memory.edges_out.all()
            if edge.relationship != "supersedes"
        ],
        "source": memory.source,
        "embedding_status": memory.embedding_status,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "expires_at": memory.expires_at,
    }


class ScratchpadIn(StrictSchema):
    # No ttl_seconds: scratchpad entries live until overwritten or deleted, and an
    # unknown field is a 422 rather than a silently ignored expiry.
    user_id: UserId
    value: Any


class ScratchpadOut(Schema):
    key: str
    value: Any
    updated_at: datetime
    # Always null today (no TTL); in the answer so clients need no change if TTL comes.
    expires_at: datetime | None = None


class ScratchpadListOut(Schema):
    items: list[ScratchpadOut]

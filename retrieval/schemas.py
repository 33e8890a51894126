"""Schemas of the retrieval and tool endpoints (docs/api.md: POST /retrieve, /tools)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from ninja import Schema
from pydantic import Field, StringConstraints, model_validator

from conversations.schemas import ChatMessageIn
from memories.schemas import BodyOut, Category, KindName, MemoryOut, StrictSchema, UserId, memory_out

if TYPE_CHECKING:
    from retrieval.ranking.episodes import Episode
    from retrieval.shapes import Hit, RetrieveResult

Text = Annotated[str, StringConstraints(max_length=32_000)]


class RetrieveIn(StrictSchema):
    user_id: UserId
    query: Text | None = None
    messages: list[ChatMessageIn] | None = Field(None, max_length=500)
    turn_id: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    limit: int = Field(10, ge=1, le=100)
    token_budget: int | None = Field(None, ge=0, le=100_000)
    min_score: float | None = Field(None, ge=0, le=1)
    kinds: list[KindName] | None = None
    categories: list[Category] | None = None
    hyde: bool | None = None
    hop_depth: int = Field(1, ge=0, le=3)
    include_superseded: bool = False
    # The LLM judge stage (needs an LLM): None follows MEMORYHUB_JUDGE.
    judge: bool | None = None
    # Search the user's captured messages (episodes) beside memories.
    episodes: bool = True
    # Start the injection with the user's profile (docs/api.md).
    profile: bool = True

    @model_validator(mode="after")
    def query_or_messages(self) -> RetrieveIn:
        if not self.query and not self.messages:
            raise ValueError("give either query or messages")
        return self


class RetrievedMemoryOut(MemoryOut):
    score: float
    matched_by: list[str]
    chain: list[MemoryOut]


class EpisodeOut(Schema):
    """A message the user (or the assistant) said, found beside the memories."""

    id: str
    conversation_id: str
    session_id: str
    role: str
    content: str
    said_at: datetime
    correlation_id: str
    context: str
    score: float
    matched_by: list[str]


class InjectedFactOut(BodyOut):
    text: str
    memory_ids: list[str]


class InjectedProfileOut(BodyOut):
    """The part of the user's profile that starts the injection."""

    version: int
    text: str
    token_count: int
    facts: list[InjectedFactOut]


class RetrieveOut(BodyOut):
    memories: list[RetrievedMemoryOut]
    episodes: list[EpisodeOut]
    injection: str
    token_count: int
    truncated: bool
    cached: bool
    degraded: list[str]
    hypotheses: list[str]
    timings_ms: dict[str, float]
    correlation_id: str
    profile: InjectedProfileOut | None


class QueryMemoryIn(StrictSchema):
    user_id: UserId
    query: Annotated[str, StringConstraints(min_length=1, max_length=8192)]
    types: list[KindName] | None = None
    categories: list[Category] | None = None
    limit: int = Field(10, ge=1, le=50)


class ToolMemoryOut(Schema):
    content: str
    type: str
    relevance: float
    context: str


class QueryMemoryMeta(Schema):
    count: int
    truncated: bool
    by_category: dict[str, list[int]]
    # As RetrieveOut.degraded: stages skipped, or "rate_limited" when the user's limit was reached.
    degraded: list[str] = []


class QueryMemoryOut(Schema):
    memories: list[ToolMemoryOut]
    metadata: QueryMemoryMeta


class AddMemoryIn(StrictSchema):
    user_id: UserId
    content: str
    type: KindName = "fact"
    category: Category = ""


def retrieve_out(result: RetrieveResult) -> dict[str, Any]:
    """The body of ``POST /retrieve`` (``RetrieveOut``) for an engine result."""
    return {
        "memories": [hit_out(hit) for hit in result.memories],
        "episodes": [episode_out(episode) for episode in result.episodes],
        "injection": result.injection,
        "token_count": result.token_count,
        "truncated": result.truncated,
        "cached": result.cached,
        "degraded": result.degraded,
        "hypotheses": result.hypotheses,
        "timings_ms": result.timings_ms,
        "correlation_id": result.correlation_id,
        "profile": result.profile,
    }


def episode_out(episode: Episode) -> dict[str, Any]:
    return {
        "id": episode.id,
        "conversation_id": episode.conversation_id,
        "session_id": episode.session_id,
        "role": episode.role,
        "content": episode.content,
        "said_at": episode.said_at,
        "correlation_id": episode.correlation_id,
        "context": episode.context,
        "score": round(episode.score, 4),
        "matched_by": list(episode.matched_by),
    }


def hit_out(hit: Hit) -> dict[str, Any]:
    return {
        **memory_out(hit.memory),
        "score": hit.score,
        "matched_by": list(hit.matched_by),
        "chain": [memory_out(old) for old in hit.chain],
    }

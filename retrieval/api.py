"""Agent endpoints: POST /retrieve, the OpenAI tool schemas and the query_memory tool."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from memories import selectors, services
from memories.schemas import MemoryOut, memory_out
from memoryhub.auth import ERRORS, actor, api_key
from memoryhub.idempotency import idempotent
from retrieval.engine import RetrieveRequest, retrieve
from retrieval.schemas import AddMemoryIn, QueryMemoryIn, QueryMemoryOut, RetrieveIn, RetrieveOut, retrieve_out
from retrieval.tools import TOOL_SCHEMAS, tool_memories

router = Router(tags=["retrieval"])


@router.post("/retrieve", response={200: RetrieveOut, **ERRORS})
def retrieve_memories(request: HttpRequest, body: RetrieveIn) -> dict[str, Any]:
    """The few memories that matter for this turn, packed into the token budget.

    200 even when a stage fails (it is skipped and named in ``degraded``); 429 with
    ``Retry-After`` over the per-user rate limit, so "nothing relevant" and "slow down" differ.
    """
    return retrieve_out(retrieve(project=api_key(request).project, request=retrieve_request(body)))


def retrieve_request(body: RetrieveIn) -> RetrieveRequest:
    """The engine's request for a POST /retrieve body (every transport builds it here)."""
    data = body.model_dump()
    data["messages"] = [m.model_dump(mode="json") for m in body.messages] if body.messages else None
    return RetrieveRequest(**data)


@router.get("/tools", response={200: list[dict[str, Any]], **ERRORS})
def tool_schemas(request: HttpRequest) -> list[dict[str, Any]]:
    """OpenAI function-tool schemas an agent framework can register as they are."""
    return TOOL_SCHEMAS


@router.post("/tools/query_memory", response={200: QueryMemoryOut, **ERRORS})
def query_memory(request: HttpRequest, body: QueryMemoryIn) -> dict[str, Any]:
    """The ``query_memory`` tool: relevant memories as content, type, relevance and context."""
    result = retrieve(
        project=api_key(request).project,
        request=RetrieveRequest(
            user_id=body.user_id,
            query=body.query,
            kinds=body.types,
            categories=body.categories,
            limit=body.limit,
            hop_depth=1,
        ),
    )
    return tool_memories(result)


@router.post("/tools/add_memory", response={201: MemoryOut, **ERRORS})
@idempotent
def add_memory(request: HttpRequest, body: AddMemoryIn) -> Status[Any]:
    """The ``add_memory`` tool: store one memory for the user (embedded before the answer)."""
    draft = services.MemoryDraft(user_id=body.user_id, content=body.content, kind=body.type, category=body.category)
    project = api_key(request).project
    memory = services.memory_create(project=project, draft=draft, actor=actor(request))
    # Re-read, as POST /memories does: the row as stored, so embedding_status is not a stale "pending".
    return Status(
        201, memory_out(selectors.memory_get_visible(project=project, user_id=body.user_id, memory_id=memory.pk))
    )

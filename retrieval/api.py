"""Agent endpoints: POST /retrieve, the OpenAI tool schemas and the query_memory tool."""

from __future__ import annotations

import uuid
from typing import Any

from django.apps import apps
from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from common.auth import ERRORS, actor, api_key
from common.errors import RateLimited
from common.idempotency import idempotent
from memories import selectors, services
from memories.models import Project
from memories.schemas import MemoryWriteOut, memory_write_out
from retrieval.engine import retrieve
from retrieval.schemas import AddMemoryIn, QueryMemoryIn, QueryMemoryOut, RetrieveIn, RetrieveOut, retrieve_out
from retrieval.shapes import RetrieveRequest, RetrieveResult
from retrieval.tools import TOOL_SCHEMAS, tool_memories

router = Router(tags=["retrieval"])


@router.post("/retrieve", response={200: RetrieveOut, **ERRORS})
def retrieve_memories(request: HttpRequest, response: HttpResponse, body: RetrieveIn) -> dict[str, Any]:
    """The few memories that matter for this turn, packed into the token budget.

    200 even when a stage fails (it is skipped and named in ``degraded``). Over the per-user
    rate limit (``Project.retrieval_rate_limit`` a minute) it is 200 too: a turn already answered
    gets its cached answer, any other an empty one with ``degraded: ["rate_limited"]``, and a
    ``Retry-After`` header says in how many seconds the limit opens again, for a client that
    wants to wait. An agent's turn goes on without its memories instead of failing.
    """
    result, retry_after = retrieve_within_limit(project=api_key(request).project, request=retrieve_request(body))
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return retrieve_out(result)


def retrieve_within_limit(*, project: Project, request: RetrieveRequest) -> tuple[RetrieveResult, int | None]:
    """What every agent transport answers for a retrieve: the engine's result and None, or, over
    the user's rate limit, an empty result naming ``rate_limited`` and the seconds to wait.

    The engine answers a turn from its cache before it counts the call, so a turn asked again
    keeps its answer however many calls came between."""
    try:
        return retrieve(project=project, request=request), None
    except RateLimited as limited:
        details = limited.details if isinstance(limited.details, dict) else {}
        wait = int(details.get("retry_after") or 1)
        return RetrieveResult(degraded=["rate_limited"], correlation_id=uuid.uuid4().hex), wait


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
def query_memory(request: HttpRequest, response: HttpResponse, body: QueryMemoryIn) -> dict[str, Any]:
    """The ``query_memory`` tool: relevant memories as content, type, relevance and context.

    Over the rate limit, as POST /retrieve: 200 with no memories, ``metadata.degraded`` naming
    ``rate_limited`` and a ``Retry-After`` header."""
    result, retry_after = retrieve_within_limit(
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
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return tool_memories(result)


@router.post("/tools/add_memory", response={201: MemoryWriteOut, 200: MemoryWriteOut, **ERRORS})
@idempotent
def add_memory(request: HttpRequest, body: AddMemoryIn) -> Status[Any]:
    """The ``add_memory`` tool: store one memory for the user (embedded before the answer); the
    same content as an active memory of theirs answers that one (200, ``created: false``)."""
    draft = services.MemoryDraft(user_id=body.user_id, content=body.content, kind=body.type, category=body.category)
    project = api_key(request).project
    memory, created = services.memory_create_once(project=project, draft=draft, actor=actor(request))
    # Re-read, as POST /memories does: the row as stored, so embedding_status is not a stale "pending".
    stored = selectors.memory_get_visible(project=project, user_id=body.user_id, memory_id=memory.pk)
    return Status(
        201 if created else 200, memory_write_out(stored, created=created, profiles=apps.is_installed("profiles"))
    )

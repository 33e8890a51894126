"""What each MCP tool and resource does, without any MCP: the HTTP API's operation, called
with the same schema, the same services and selectors, and answering the same error codes.

A :class:`Principal` says who acts: the project (from the API key, or ``--project`` over
stdio), the actor written into revisions, and the end user when the connection is bound to
one (docs/adr/0048-mcp-server.md). Everything here is synchronous Django code; ``server.py``
runs it on the thread that owns the request's database connection.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from django.apps import apps
from django.db import close_old_connections, connection
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from capture import services as capture_services
from capture.schemas import CaptureIn, JobAcceptedOut
from common import row_security
from common.errors import Invalid, NotFound, envelope_for, validation_envelope
from integrations.mcp.schemas import (
    ForgetOut,
    ListMemoriesIn,
    MemoryRefIn,
    ScratchpadGetIn,
    ScratchpadPutIn,
    SupersedeMemoryIn,
    UpdateMemoryIn,
)
from memories import lifecycle, scratchpad, selectors, services
from memories.api import memory_create_from, memory_page, memory_supersede_from
from memories.models import Project
from memories.schemas import (
    MemoryIn,
    MemoryOut,
    MemoryPageOut,
    MemoryWriteOut,
    ScratchpadOut,
    memory_out,
    memory_write_out,
)
from profiles import selectors as profile_selectors
from profiles.schemas import ProfileOut
from profiles.services import profile_as_dict
from retrieval.api import retrieve_request, retrieve_within_limit
from retrieval.schemas import RetrieveIn, RetrieveOut, retrieve_out

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who a connection acts as. ``user_id`` None: every call names its user, as over HTTP."""

    project: Project
    actor: str
    user_id: str | None = None
    # A stdio server lives for hours on one thread: check its connection before each call,
    # as Django does at the start of every HTTP request.
    long_lived: bool = False


class ToolError(Exception):
    """An API error envelope (``{"error": {code, message, details}}``) and its HTTP status."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.envelope = {"error": {"code": code, "message": message, "details": details}}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: type[BaseModel]
    out: type[BaseModel]
    run: Callable[[Principal, Any], Any]


def _fresh(principal: Principal, user_id: str, memory_id: Any) -> dict[str, Any]:
    """The memory as stored, re-read through the selector (as the API answers a write)."""
    return memory_out(selectors.memory_get_visible(project=principal.project, user_id=user_id, memory_id=memory_id))


def _query_memory(p: Principal, body: RetrieveIn) -> dict[str, Any]:
    # Over the user's rate limit the tool still succeeds: no memories, degraded names
    # "rate_limited" (an agent's turn goes on without them; a tool error would stop it).
    result, _ = retrieve_within_limit(project=p.project, request=retrieve_request(body))
    return retrieve_out(result)


def _written(principal: Principal, user_id: str, memory_id: Any, *, created: bool) -> dict[str, Any]:
    """A write's answer as the API gives it (``MemoryWriteOut``)."""
    stored = selectors.memory_get_visible(project=principal.project, user_id=user_id, memory_id=memory_id)
    return memory_write_out(stored, created=created, profiles=apps.is_installed("profiles"))


def _add_memory(p: Principal, body: MemoryIn) -> dict[str, Any]:
    memory, created = memory_create_from(project=p.project, body=body, actor=p.actor)
    return _written(p, body.user_id, memory.pk, created=created)


def _update_memory(p: Principal, body: UpdateMemoryIn) -> dict[str, Any]:
    memory = selectors.memory_get_visible(project=p.project, user_id=body.user_id, memory_id=body.memory_id)
    changes = body.model_dump(exclude_unset=True, exclude={"user_id", "reason", "memory_id"})
    services.memory_edit(memory=memory, changes=changes, actor=p.actor, reason=body.reason)
    return _fresh(p, body.user_id, memory.pk)


def _supersede_memory(p: Principal, body: SupersedeMemoryIn) -> dict[str, Any]:
    new = memory_supersede_from(
        project=p.project, memory_id=body.memory_id, body=body, scope=body.scope, reason=body.reason, actor=p.actor
    )
    return _written(p, body.user_id, new.pk, created=True)


def _forget_memory(p: Principal, body: MemoryRefIn) -> dict[str, Any]:
    memory = selectors.memory_get_visible(project=p.project, user_id=body.user_id, memory_id=body.memory_id)
    forgotten = lifecycle.memory_delete(memory=memory, actor=p.actor)
    return {"id": str(forgotten.pk), "status": forgotten.status}


def _list_memories(p: Principal, body: ListMemoriesIn) -> dict[str, Any]:
    return memory_page(project=p.project, query=body)


def _capture_conversation(p: Principal, body: CaptureIn) -> dict[str, Any]:
    job = capture_services.capture_submit(
        project=p.project,
        user_id=body.user_id,
        session_id=body.session_id,
        trigger=body.trigger,
        messages=[m.model_dump(mode="json", exclude_unset=True) for m in body.messages],
        conversation_id=body.conversation_id,
        actor=p.actor,
    )
    return {"job_id": str(job.pk), "status": job.status}


def _scratchpad_get(p: Principal, body: ScratchpadGetIn) -> Any:
    return scratchpad.scratchpad_get(project=p.project, user_id=body.user_id, key=body.key)


def _scratchpad_put(p: Principal, body: ScratchpadPutIn) -> Any:
    return scratchpad.scratchpad_put(project=p.project, user_id=body.user_id, key=body.key, value=body.value)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "query_memory",
            "The memories that matter for this turn, packed into the project's token budget: `injection` is "
            "the text to put in the prompt, `memories` the memories with scores (POST /api/v1/retrieve). "
            "Give `query` (or the recent `messages`). Over the user's rate limit the answer is empty and "
            "`degraded` names `rate_limited`.",
            RetrieveIn,
            RetrieveOut,
            _query_memory,
        ),
        Tool(
            "add_memory",
            "Store one durable fact, preference, decision or note (POST /api/v1/memories). One self-contained "
            "sentence; never secrets or transient details. `supersedes` replaces an outdated memory. The same "
            "content as an active memory is not stored twice: `created` is false and `duplicate_of` names it.",
            MemoryIn,
            MemoryWriteOut,
            _add_memory,
        ),
        Tool(
            "update_memory",
            "Correct fields of a memory in place, recorded as a revision (PATCH /api/v1/memories/{id}).",
            UpdateMemoryIn,
            MemoryOut,
            _update_memory,
        ),
        Tool(
            "supersede_memory",
            "Write a new version of a memory that changed; the old one is kept as superseded "
            "(POST /api/v1/memories/{id}/supersede).",
            SupersedeMemoryIn,
            MemoryWriteOut,
            _supersede_memory,
        ),
        Tool(
            "forget_memory",
            "Forget a memory: soft delete, gone from every read, history kept (DELETE /api/v1/memories/{id}).",
            MemoryRefIn,
            ForgetOut,
            _forget_memory,
        ),
        Tool(
            "list_memories",
            "The user's memories, newest first, filtered and paginated with `cursor` (GET /api/v1/memories).",
            ListMemoriesIn,
            MemoryPageOut,
            _list_memories,
        ),
        Tool(
            "capture_conversation",
            "Hand the conversation's latest messages to capture, which decides in the background what is "
            "worth remembering (POST /api/v1/capture). Answers the job id.",
            CaptureIn,
            JobAcceptedOut,
            _capture_conversation,
        ),
        Tool(
            "scratchpad_get",
            "Read one key of the user's scratchpad, the working memory of a task (GET /api/v1/scratchpad/{key}).",
            ScratchpadGetIn,
            ScratchpadOut,
            _scratchpad_get,
        ),
        Tool(
            "scratchpad_put",
            "Create or overwrite one key of the user's scratchpad with any JSON value (PUT /api/v1/scratchpad/{key}).",
            ScratchpadPutIn,
            ScratchpadOut,
            _scratchpad_put,
        ),
    )
}


@functools.cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Generating a schema takes milliseconds, and the SDK asks for a tool's input schema on
    # every 2026-07-28 tools/call (to check Mcp-Param headers): build each once per process.
    return model.model_json_schema()


def output_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema of the tool's answer: its API operation's response schema."""
    return _json_schema(tool.out)


def input_schema(tool: Tool, *, principal: Principal) -> dict[str, Any]:
    """The tool's JSON schema: its API schema's, without ``user_id`` when the connection fixes it."""
    schema = copy.deepcopy(_json_schema(tool.schema))
    if principal.user_id is not None:
        schema["properties"].pop("user_id", None)
        schema["required"] = [name for name in schema.get("required", []) if name != "user_id"]
    return schema


def call_tool(principal: Principal, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run tool ``name`` for ``principal``: its answer as the API's JSON, or ToolError."""
    tool = TOOLS[name]
    return dict(in_tenant(principal, lambda: _validated_run(tool, principal, arguments)))


def _validated_run(tool: Tool, principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        body = tool.schema.model_validate(with_user(principal, arguments))
    except PydanticValidationError as exc:
        message, details = validation_envelope(exc.errors())
        raise ToolError(422, "validation_error", message, details) from exc
    # The answer goes through the API's response schema, as ninja sends it (a mismatch is a 500).
    return tool.out.model_validate(tool.run(principal, body)).model_dump(mode="json")


def with_user(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with the connection's user; another user's id is refused, never followed."""
    if principal.user_id is None:
        return arguments
    given = arguments.get("user_id", principal.user_id)
    if given != principal.user_id:
        raise Invalid(
            "user_id: this connection acts for one user (--user or the X-MemoryHub-User header); leave user_id out",
            code="user_fixed",
        )
    return {**arguments, "user_id": principal.user_id}


def in_tenant(principal: Principal, work: Callable[[], Any]) -> Any:
    """Run ``work`` confined to the principal's project (row security), errors as ToolError."""
    if principal.long_lived:
        close_old_connections()
    entered = False
    if getattr(connection, "memoryhub_tenant", None) != principal.project.pk:
        entered = row_security.enter(principal.project.pk)
    try:
        return work()
    except ToolError:
        raise
    except Exception as exc:
        known = envelope_for(exc)
        if known is None:
            log.exception("unhandled error in an MCP call")
            known = (500, "internal_error", "an unexpected error occurred; it has been logged", None)
        raise ToolError(*known) from exc
    finally:
        if entered:
            row_security.leave()


# --- resources: a user's memories by category -------------------------------------------------

RESOURCE_PREFIX = "memoryhub://users/"
RESOURCE_TEMPLATE = RESOURCE_PREFIX + "{user_id}/memories/{category}"
RESOURCE_LIMIT = 200  # the largest page GET /memories answers
PROFILE_TEMPLATE = RESOURCE_PREFIX + "{user_id}/profile"


def profile_resource_uri(*, user_id: str) -> str:
    return RESOURCE_PREFIX + f"{quote(user_id, safe='')}/profile"


def resource_uri(*, user_id: str, category: str) -> str:
    return RESOURCE_PREFIX + f"{quote(user_id, safe='')}/memories/{quote(category, safe='')}"


def category_resources(principal: Principal) -> list[tuple[str, str]]:
    """(uri, category) per category of the project's taxonomy, for the connection's user (none
    when each call names its user: the template is there for those)."""
    if principal.user_id is None:
        return []
    taxonomy = [str(name) for name in principal.project.taxonomy or []]
    return [(resource_uri(user_id=principal.user_id, category=name), name) for name in taxonomy]


def read_resource(principal: Principal, uri: str) -> dict[str, Any]:
    """The newest memories of one user in one category, as GET /memories answers them."""

    def work() -> dict[str, Any]:
        if uri.startswith(RESOURCE_PREFIX) and uri.endswith("/profile"):
            return _profile(uri)
        user_id, category = _parse_resource(uri)
        try:
            query = ListMemoriesIn.model_validate(
                with_user(principal, {"user_id": user_id, "category": category, "limit": RESOURCE_LIMIT})
            )
        except PydanticValidationError as exc:
            message, details = validation_envelope(exc.errors())
            raise ToolError(422, "validation_error", message, details) from exc
        return MemoryPageOut.model_validate(memory_page(project=principal.project, query=query)).model_dump(mode="json")

    def _profile(uri: str) -> dict[str, Any]:
        user_id = unquote(uri.removeprefix(RESOURCE_PREFIX).removesuffix("/profile"))
        if not user_id or "/" in user_id:
            raise NotFound(f"no resource {uri!r}; the profile is {PROFILE_TEMPLATE}", code="not_found")
        user_id = with_user(principal, {"user_id": user_id})["user_id"]
        profile = profile_selectors.profile_get(project=principal.project, user_id=user_id)
        return ProfileOut.model_validate(profile_as_dict(profile)).model_dump(mode="json")

    return dict(in_tenant(principal, work))


def _parse_resource(uri: str) -> tuple[str, str]:
    parts = uri.removeprefix(RESOURCE_PREFIX).split("/") if uri.startswith(RESOURCE_PREFIX) else []
    if len(parts) != 3 or parts[1] != "memories" or not parts[0] or not parts[2]:
        raise NotFound(f"no resource {uri!r}; resources are {RESOURCE_TEMPLATE}", code="not_found")
    return unquote(parts[0]), unquote(parts[2])

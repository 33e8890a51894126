"""Tool inputs: the HTTP API's own schemas, plus the id that HTTP carries in the path.

Each class adds at most ``memory_id`` or ``key`` (a path segment over HTTP) to an API
schema, so every field, limit and validator is the API's.
"""

from __future__ import annotations

from typing import Literal

from ninja import Schema
from pydantic import ConfigDict

from memories.schemas import MemoryListQuery, MemoryPatch, ScratchpadIn, StrictSchema, SupersedeIn, UserId


class ListMemoriesIn(MemoryListQuery):
    # GET /memories ignores unknown query parameters, as HTTP does; a tool argument with a
    # typo is a mistake worth hearing about, as in every JSON body of the API.
    model_config = ConfigDict(extra="forbid")


class MemoryRefIn(StrictSchema):
    """A memory the user may see: the path and query of DELETE /memories/{memory_id}."""

    user_id: UserId
    memory_id: str


class UpdateMemoryIn(MemoryPatch):
    """PATCH /memories/{memory_id}."""

    memory_id: str


class SupersedeMemoryIn(SupersedeIn):
    """POST /memories/{memory_id}/supersede."""

    memory_id: str


class ScratchpadGetIn(StrictSchema):
    """GET /scratchpad/{key}."""

    user_id: UserId
    key: str


class ScratchpadPutIn(ScratchpadIn):
    """PUT /scratchpad/{key}."""

    key: str


class ForgetOut(Schema):
    """What ``forget_memory`` did: DELETE /memories/{id} answers 204, a tool answers this."""

    id: str
    status: Literal["deleted"]

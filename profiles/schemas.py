"""Schemas of the profile endpoints (docs/api.md: GET /users/{user_id}/profile)."""

from __future__ import annotations

from datetime import datetime

from memories.schemas import BodyOut, StrictSchema


class ProfileFactOut(BodyOut):
    text: str
    memory_ids: list[str]
    pinned: bool


class ProfileOut(BodyOut):
    user_id: str
    text: str
    facts: list[ProfileFactOut]
    version: int
    token_count: int
    updated_at: datetime
    pinned: list[str]
    hidden_memory_ids: list[str]


class ProfileEditIn(StrictSchema):
    """A person's edit; a field left out keeps its value."""

    pinned: list[str] | None = None
    hidden_memory_ids: list[str] | None = None
    reason: str = ""


class ProfileVersionOut(BodyOut):
    version: int
    text: str
    pinned: list[str]
    hidden_memory_ids: list[str]
    actor: str
    reason: str
    created_at: datetime


class ProfileVersionsOut(BodyOut):
    user_id: str
    versions: list[ProfileVersionOut]

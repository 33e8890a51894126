"""Schemas of the profile endpoints (docs/api.md: GET /users/{user_id}/profile)."""

from __future__ import annotations

from datetime import datetime

from memories.schemas import BodyOut


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

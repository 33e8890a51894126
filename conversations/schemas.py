"""The one shape of a chat message that every endpoint taking messages accepts (conversations,
capture, retrieve)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, field_validator


class ChatMessageIn(BaseModel):
    """One chat message as an agent framework sends it; other keys (``tool_calls``, ``name``…)
    are kept as they are, and never reach the classifier."""

    # A plain pydantic model: ninja's Schema reads input through attribute access, which
    # would drop the extra keys this model exists to keep.
    model_config = ConfigDict(extra="allow")

    role: Annotated[str, StringConstraints(min_length=1, max_length=20)]
    content: str | list[Any] | dict[str, Any] | None = None
    correlation_id: Annotated[str, StringConstraints(max_length=100)] = ""
    # When the message was said (ISO 8601). Relative dates in it ("yesterday") are read against
    # it; a time without a zone is taken as UTC. Absent: the time the service received it.
    timestamp: datetime | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def timestamp_is_text(cls, value: Any) -> Any:
        # ISO 8601 text only: a bare number would be read as seconds since 1970.
        if value is not None and not isinstance(value, str | datetime):
            raise ValueError("timestamp must be an ISO 8601 date-time string")
        return value

"""The one shape of a chat message that every endpoint taking messages accepts (conversations,
capture, retrieve)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints


class ChatMessageIn(BaseModel):
    """One chat message as an agent framework sends it; other keys (``tool_calls``, ``name``…)
    are kept as they are, and never reach the classifier."""

    # A plain pydantic model: ninja's Schema reads input through attribute access, which
    # would drop the extra keys this model exists to keep.
    model_config = ConfigDict(extra="allow")

    role: Annotated[str, StringConstraints(min_length=1, max_length=20)]
    content: str | list[Any] | dict[str, Any] | None = None
    correlation_id: Annotated[str, StringConstraints(max_length=100)] = ""

"""What the capture pipeline proposes to remember, before anything touches the database.

Every extractor (the LLM classifier, the rule-based extractor, the observation extractor)
produces ``ProposedMemory`` values; the capture service decides whether and how to store them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

KINDS: tuple[str, ...] = ("fact", "preference", "decision", "note")
SCOPES: tuple[str, ...] = ("user", "project")

MAX_CONTENT_CHARS = 2000
DEFAULT_IMPORTANCE = 0.5
DEFAULT_CONFIDENCE = 0.7


@dataclass(frozen=True)
class ProposedMemory:
    """One candidate memory: a self-contained third-person statement plus its labels.

    ``category`` is not checked here because each project has its own taxonomy; the
    extractors validate it against the taxonomy they were given.
    """

    content: str
    kind: str
    category: str
    scope: str = "user"
    importance: float = DEFAULT_IMPORTANCE
    confidence: float = DEFAULT_CONFIDENCE
    supersedes: str | None = None
    related: tuple[str, ...] = ()
    reason: str = ""
    evidence: str = ""
    # The day (or month, or year) the statement is about, as ISO text, when it names one.
    event_date: str = ""

    def __post_init__(self) -> None:
        # A proposal is built from untrusted LLM output in one path; failing loudly here
        # keeps an invalid value from reaching the database through any other path.
        if not self.content.strip():
            raise ValueError("content must not be empty")
        if len(self.content) > MAX_CONTENT_CHARS:
            raise ValueError(f"content is longer than {MAX_CONTENT_CHARS} characters")
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}")
        for name in ("importance", "confidence"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1]")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (``related`` as a list), e.g. for a capture job's log."""
        data = dataclasses.asdict(self)
        data["related"] = list(self.related)
        return data

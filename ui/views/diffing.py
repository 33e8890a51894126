"""Readable changes between a revision's ``before`` and ``after`` snapshots."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from memories.models import MemoryRevision

# Split into words and the whitespace between them so a diff reads like prose.
_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    op: str  # "same", "del" or "ins"
    text: str


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: Any
    after: Any


@dataclass(frozen=True)
class RevisionView:
    revision: MemoryRevision
    content_diff: list[Segment]
    fields: list[FieldChange]


def word_diff(before: str, after: str) -> list[Segment]:
    """Word-level diff: runs of unchanged, deleted and inserted text."""
    old, new = _TOKENS.findall(before), _TOKENS.findall(after)
    segments: list[Segment] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            segments.append(Segment("same", "".join(old[i1:i2])))
            continue
        if i2 > i1:
            segments.append(Segment("del", "".join(old[i1:i2])))
        if j2 > j1:
            segments.append(Segment("ins", "".join(new[j1:j2])))
    return segments


def revision_view(revision: MemoryRevision) -> RevisionView:
    """What a revision changed: a content diff (only if content changed) and the other fields."""
    before, after = revision.before or {}, revision.after or {}
    content_diff: list[Segment] = []
    if before and before.get("content") != after.get("content"):
        content_diff = word_diff(str(before.get("content", "")), str(after.get("content", "")))
    fields = [
        FieldChange(name, before.get(name), after.get(name))
        for name in sorted(set(before) | set(after))
        if name != "content" and before and before.get(name) != after.get(name)
    ]
    return RevisionView(revision=revision, content_diff=content_diff, fields=fields)

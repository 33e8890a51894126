"""How the command line prints: plain lines for people, one JSON document with ``--json``."""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import datetime
from typing import Any, TextIO


def plain(value: Any) -> Any:
    """A model (dataclass) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def emit_json(value: Any, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    json.dump(plain(value), stream, ensure_ascii=False, indent=2)
    stream.write("\n")


def memory_line(memory: Any) -> str:
    """One memory on one line: id, kind, category and the content's first line."""
    first = memory.content.splitlines()[0] if memory.content else ""
    category = f" [{memory.category}]" if memory.category else ""
    return f"{memory.id}  {memory.kind}{category}  {first}"

"""The natural multi-session set (``evaluation/data/pipeline/natural.jsonl``, format in its README).

Loading, the alias match the evaluation scores with, and the resolution of relative dates the
set's temporal questions were labelled with. No Django, no database.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

NATURAL_PATH = Path(__file__).resolve().parent / "data" / "pipeline" / "natural.jsonl"
QUESTION_TYPES = ("single", "multi", "temporal", "change", "unanswerable")
SPLITS = ("dev", "heldout")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5}


def load_natural(path: Path = NATURAL_PATH, *, split: str = "all") -> list[dict[str, Any]]:
    """The people of the set (one dict per line), those of ``split`` only unless it is ``all``."""
    people = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [p for p in people if split == "all" or p["split"] == split]


def alias_in(alias: str, text: str) -> bool:
    """True when ``alias`` occurs in ``text``, case-insensitively, starting at a word boundary.

    Only the start is anchored: people write "july 6th" and "sundays", and an alias must still
    match them, while a short name must not match inside another word ("sam" in "jessamy")."""
    return re.search(r"(?<!\w)" + re.escape(alias.lower()), text.lower()) is not None


def any_alias_in(aliases: list[str], text: str) -> bool:
    return any(alias_in(alias, text) for alias in aliases)


def resolve_relative(phrase: str, day: dt.date) -> str:
    """``phrase`` ("yesterday", "on saturday", "last month"…) said on ``day``, as ISO (day or month)."""
    said = phrase.lower().strip()
    if said in ("today", "this morning", "tonight", "earlier today"):
        return day.isoformat()
    if said == "yesterday":
        return (day - dt.timedelta(days=1)).isoformat()
    if said == "tomorrow":
        return (day + dt.timedelta(days=1)).isoformat()
    if match := re.fullmatch(r"(\w+) days ago", said):
        count = int(match.group(1)) if match.group(1).isdigit() else _NUMBERS[match.group(1)]
        return (day - dt.timedelta(days=count)).isoformat()
    if said == "last week":
        return (day - dt.timedelta(days=7)).isoformat()
    if said == "last month":
        return (day.replace(day=1) - dt.timedelta(days=1)).strftime("%Y-%m")
    if said == "next month":
        return (day.replace(day=28) + dt.timedelta(days=5)).strftime("%Y-%m")
    for index, name in enumerate(WEEKDAYS):
        if said in (name, f"on {name}", f"last {name}", f"this past {name}"):
            back = (day.weekday() - index - 1) % 7 + 1  # strictly before the day it was said
            return (day - dt.timedelta(days=back)).isoformat()
        if said in (f"next {name}", f"this coming {name}", f"coming {name}"):
            ahead = (index - day.weekday() - 1) % 7 + 1
            return (day + dt.timedelta(days=ahead)).isoformat()
    raise ValueError(f"no rule for the relative date {phrase!r}")


def date_forms(iso: str) -> list[str]:
    """How a resolved date may be written in a memory: ISO, "march 7", "7 march", "mar 7"."""
    if len(iso) == 7:
        year, month = iso.split("-")
        return [iso, f"{MONTHS[int(month) - 1]} {year}"]
    day = dt.date.fromisoformat(iso)
    name = MONTHS[day.month - 1]
    return [iso, f"{name} {day.day}", f"{day.day} {name}", f"{name[:3]} {day.day}"]

"""The natural multi-session sets (``evaluation/data/pipeline/natural*.jsonl``, format in their README).

Loading and the alias match the evaluation scores with. No Django, no database. The rules the
set's temporal questions were labelled with are checked in tests/evaluation/test_pipeline_dataset.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

NATURAL_PATH = Path(__file__).resolve().parent / "data" / "pipeline" / "natural.jsonl"
# Written later, by other hands, to see whether what was tuned on the first set holds on people
# nobody had read while writing rules (same format, people p43 onwards).
NATURAL_MORE_PATH = NATURAL_PATH.with_name("natural_more.jsonl")
SPLITS = ("dev", "heldout")


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

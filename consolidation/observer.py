"""Which of an end user's memories an observation could be written from, and asking the LLM to
write it (docs/adr/0110-consolidation-observations.md).

Groups come from the pairs the run already found by vector (``vectors.candidates``: each changed
memory's nearest current memories of the same scope), so picking them costs no product of its
own. A changed memory with at least two eligible neighbours at cosine ``GROUP_MIN_COSINE`` or more
makes a group with its closest ``GROUP_MAX - 1``; groups are taken most cohesive first, a memory
in one group a run, at most ``MAX_GROUPS`` a run sent ``BATCH`` to a request, so a run makes at
most two LLM calls however large the store. The threshold is low on purpose: with
all-MiniLM-L6-v2 two different facts about one topic ("works as a data engineer" / "writes SQL
every day") sit at 0.4-0.6, and the LLM, not the cosine, decides whether a group says something
together. Its answer cites memories by their number in the group; a statement citing fewer than
two, or an answer that is not JSON, yields nothing.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from capture.classifier import iter_json_values
from consolidation.vectors import Candidate
from retrieval.llm import LLMError, complete, llm_configured
from retrieval.ranking.episodes import stems

log = logging.getLogger(__name__)

GROUP_MIN_COSINE = 0.40
GROUP_MIN = 3
GROUP_MAX = 6
MAX_GROUPS = 10
BATCH = 5
MIN_CITED = 2
# More than half of an observation's words must come from the memories it cites. A small model
# asked to draw a statement from "takes allopurinol" and "gets seasick" writes "his dose is
# consistent with his training for a marathon": words nobody said. Read on the everyday set
# (docs/benchmarks.md, Consolidation), every statement a reader judged unsupported was at 0.5
# or under, and 6 of the 7 fully supported ones above. "More than half" was picked after reading
# those 29; no other set checks it yet.
MIN_GROUNDED = 0.5
STATEMENT_MAX_CHARS = 400
PROMPT_PATH = Path(__file__).parent / "prompts" / "observation.md"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "observations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "group": {"type": "integer"},
                    "statement": {"type": "string"},
                    "cites": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["group", "statement", "cites"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["observations"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Group:
    """Memories close to one changed memory (``ids[0]``); ``cohesion`` is their mean cosine to it."""

    ids: tuple[str, ...]
    cohesion: float


@dataclass(frozen=True)
class Proposal:
    """A statement the LLM wrote from a group, and the ids of the memories it cites (sorted)."""

    statement: str
    cited: tuple[str, ...]


def enabled() -> bool:
    return llm_configured()


@functools.cache
def prompt() -> str:
    return PROMPT_PATH.read_text(encoding="utf-8")


def groups(found: Sequence[Candidate], *, eligible: Collection[str], seeds: Collection[str]) -> list[Group]:
    """Groups of at least ``GROUP_MIN`` eligible memories around each seed (a changed memory: only
    a changed memory's neighbours are all among ``found``), most cohesive first, each memory in
    one group, at most ``MAX_GROUPS``."""
    near: dict[str, list[tuple[float, str]]] = {}
    for candidate in found:
        if candidate.cosine < GROUP_MIN_COSINE or candidate.first not in eligible or candidate.second not in eligible:
            continue
        near.setdefault(candidate.first, []).append((candidate.cosine, candidate.second))
        near.setdefault(candidate.second, []).append((candidate.cosine, candidate.first))
    options: list[Group] = []
    for seed in set(seeds) & near.keys():
        closest = sorted(near[seed], key=lambda pair: (-pair[0], pair[1]))[: GROUP_MAX - 1]
        if len(closest) >= GROUP_MIN - 1:
            cohesion = sum(cosine for cosine, _ in closest) / len(closest)
            options.append(Group((seed, *(memory_id for _, memory_id in closest)), cohesion))
    options.sort(key=lambda group: (-group.cohesion, group.ids))
    taken: set[str] = set()
    chosen: list[Group] = []
    for option in options:
        if option.ids[0] in taken:
            continue
        ids = tuple(memory_id for memory_id in option.ids if memory_id not in taken)
        if len(ids) < GROUP_MIN:
            continue
        chosen.append(Group(ids, option.cohesion))
        taken.update(ids)
        if len(chosen) == MAX_GROUPS:
            break
    return chosen


def propose(chosen: Sequence[Group], contents: Mapping[str, str]) -> list[Proposal]:
    """The LLM's statements for ``chosen`` (the texts of their memories in ``contents``): at most
    one per group; a failed request or an unusable answer gives none for its batch."""
    proposals: list[Proposal] = []
    for start in range(0, len(chosen), BATCH):
        batch = [[i for i in group.ids if i in contents] for group in chosen[start : start + BATCH]]
        listed = "\n\n".join(
            f"Group {g}:\n" + "\n".join(f"  {n}. {json.dumps(contents[i])}" for n, i in enumerate(ids, 1))
            for g, ids in enumerate(batch, 1)
        )
        try:
            reply = complete(
                [{"role": "system", "content": prompt()}, {"role": "user", "content": listed}],
                model=settings.MEMORYHUB_LLM_MODEL,
                timeout=settings.MEMORYHUB_CAPTURE_LLM_TIMEOUT,
                max_tokens=120 * len(batch) + 50,
                json_schema=SCHEMA,
                schema_name="observations",
            )
        except LLMError as error:
            log.warning("consolidation's observer got no answer; no observation from this batch: %s", error)
            continue
        proposals += parse(reply, batch, contents)
    return proposals


def parse(reply: str, batch: Sequence[Sequence[str]], contents: Mapping[str, str]) -> list[Proposal]:
    """The usable statements of one answer about ``batch`` (each group's memory ids in the order
    they were numbered): JSON found wherever it is in the text, one statement per group, citing
    at least two of the group's memories, saying more than any one of them, made mostly of their
    words (``MIN_GROUNDED``)."""
    items = _items(reply)
    found: dict[int, Proposal] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        number, statement = _number(item.get("group")), item.get("statement")
        if number is None or not 1 <= number <= len(batch) or number in found or not isinstance(statement, str):
            continue
        statement = " ".join(statement.split())
        ids = batch[number - 1]
        cites = item.get("cites")
        numbers = {n for n in map(_number, cites if isinstance(cites, list) else []) if n and 1 <= n <= len(ids)}
        cited = tuple(sorted(ids[n - 1] for n in numbers))
        if not statement or len(statement) > STATEMENT_MAX_CHARS or len(cited) < MIN_CITED:
            continue
        if any(_same(statement, contents.get(memory_id, "")) for memory_id in cited):
            continue  # a restatement of one memory is no observation
        if grounded(statement, [contents.get(memory_id, "") for memory_id in cited]) <= MIN_GROUNDED:
            continue
        found[number] = Proposal(statement, cited)
    return [found[number] for number in sorted(found)]


def grounded(statement: str, cited: Sequence[str]) -> float:
    """The share of ``statement``'s words (four letters or more, compared by their first five)
    found in the ``cited`` memories; 0 for a statement with none."""
    words, told = stems(statement), stems(" ".join(cited))
    return len(words & told) / len(words) if words else 0.0


def _items(reply: str) -> list[Any]:
    for value, _repaired in iter_json_values(reply):
        if isinstance(value, dict) and isinstance(value.get("observations"), list):
            return list(value["observations"])
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            return value
    return []


def _number(value: Any) -> int | None:
    """An integer, or a string of one (some models quote numbers); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _same(first: str, second: str) -> bool:
    return " ".join(first.lower().split()).rstrip(".") == " ".join(second.lower().split()).rstrip(".")

"""Which of a user's memories make their profile, chosen by rules (no LLM), within a token budget.

A profile holds standing facts: what stays true from one conversation to the next and changes
how an assistant should answer. Each active memory is read into one section by its labels and
words; memories in no section (plans, events, one-off questions) stay out. Sections take turns,
best memory first within each (importance, then the newest), so a user with hundreds of tool
preferences still has their allergy and their job in the profile. Facts are added while the
whole text fits the budget, counted with the packer's tokenizer; a fact that does not fit is
skipped and smaller ones after it may still go in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memories.services import content_hash
from retrieval.ranking.tokens import count_tokens, count_tokens_memo

# In the order they take turns; the first sections are the ones an assistant must not get wrong.
CONSTRAINTS, IDENTITY, WORK, PREFERENCES, CONVENTIONS = "constraints", "identity", "work", "preferences", "conventions"
SECTIONS = (CONSTRAINTS, IDENTITY, WORK, PREFERENCES, CONVENTIONS)

_CONSTRAINT_WORDS = re.compile(
    r"\b(allerg\w*|celiac|coeliac|gluten|lactose|dairy|vegan|vegetarian|pescatarian|kosher|halal|"
    r"intoleran\w*|diabet\w*|asthma\w*|epilep\w*|migraine\w*|medication\w*|pregnan\w*|diet\w*|"
    r"can'?t eat|cannot eat|doesn'?t eat|does not eat|avoids?|sober|alcohol|peanuts?|shellfish|"
    r"nuts?|eggs?|meat|pork|sugar|keto|blood pressure|cholesterol|injur\w*|surgery|"
    r"wheelchair|deaf|blind|adhd|anxiety|insulin)\b",
    re.IGNORECASE,
)
_IDENTITY_WORDS = re.compile(
    r"\b(partner|wife|husband|spouse|fianc[eé]e?|girlfriend|boyfriend|married|son|daughter|kids?|"
    r"children|child|baby|twins|toddler|newborn|mom|mum|mother|dad|father|parents?|sister|brother|sibling|grandm\w*|"
    r"grandp\w*|aunt|uncle|cousin|niece|nephew|roommate|dog|cat|pet|puppy|kitten|"
    r"lives? in|living in|moved to|based in|from|born|birthday|name is|named|called|years old|"
    r"pronouns?)\b",
    re.IGNORECASE,
)
_WORK_WORDS = re.compile(
    r"\b(works?|working|job|employ\w*|career|profession|occupation|engineer|developer|nurse|"
    r"teacher|doctor|manager|designer|lawyer|accountant|student|studies|studying|freelanc\w*|"
    r"company|startup|office|colleague|boss|team lead|hired|promoted|retired|role|"
    r"(?:starting|started|start) at|join(?:ed|ing)|new job|for a living|lead|chef|cooks?|translator|tutor|"
    r"teach(?:es)?|runs an?|owns an?|self-employed|unemployed|between jobs|business|bakery|restaurant|bistro|"
    r"studio|clinic|hospital|school|firm|agency)\b",
    re.IGNORECASE,
)
# Labels capture gives standing facts about the person and their conventions.
_PERSONAL_CATEGORIES = frozenset({"user-facts", "corrections"})
_PREFERENCE_CATEGORIES = frozenset({"coding-preferences"})
_CONVENTION_CATEGORIES = frozenset({"project-conventions", "architectural-decisions"})


@dataclass(frozen=True)
class Candidate:
    """One active memory as the builder reads it."""

    id: str
    content: str
    kind: str
    category: str
    scope: str
    importance: float
    created_at: datetime


@dataclass(frozen=True)
class Fact:
    text: str
    memory_ids: tuple[str, ...] = ()
    pinned: bool = False
    section: str = ""

    def as_json(self) -> dict[str, object]:
        return {"text": self.text, "memory_ids": list(self.memory_ids), "pinned": self.pinned, "section": self.section}


@dataclass
class Built:
    facts: list[Fact] = field(default_factory=list)
    text: str = ""
    token_count: int = 0


def section_of(memory: Candidate) -> str | None:
    """The profile section ``memory`` belongs to, or None when it is no standing fact."""
    if memory.scope == "project":
        return CONVENTIONS if memory.category in _CONVENTION_CATEGORIES or memory.kind == "decision" else None
    text = memory.content
    if _CONSTRAINT_WORDS.search(text):
        return CONSTRAINTS
    if memory.kind == "preference" or memory.category in _PREFERENCE_CATEGORIES:
        return PREFERENCES
    if memory.category in _PERSONAL_CATEGORIES or memory.kind == "fact":
        if _IDENTITY_WORDS.search(text):
            return IDENTITY
        if _WORK_WORDS.search(text):
            return WORK
    return None


def fact_line(text: str) -> str:
    """A fact as one line of the profile text."""
    return "- " + " ".join(text.split())


def render(facts: Iterable[Fact]) -> str:
    return "\n".join(fact_line(f.text) for f in facts)


def _ranked(memories: Sequence[Candidate], hidden: frozenset[str]) -> list[Fact]:
    """Sections taking turns, best first within each; one fact per distinct text."""
    by_section: dict[str, list[Candidate]] = {name: [] for name in SECTIONS}
    for memory in memories:
        section = section_of(memory)
        if section is not None and memory.id not in hidden:
            by_section[section].append(memory)
    queues = [
        sorted(items, key=lambda m: (-m.importance, -m.created_at.timestamp(), m.id)) for items in by_section.values()
    ]
    order: list[Fact] = []
    seen: set[str] = set()
    for round_ in range(max((len(q) for q in queues), default=0)):
        for section, queue in zip(SECTIONS, queues, strict=True):
            if round_ < len(queue) and (key := content_hash(queue[round_].content)) not in seen:
                seen.add(key)
                order.append(Fact(queue[round_].content, (queue[round_].id,), section=section))
    return order


def build(
    memories: Sequence[Candidate], *, budget: int, pinned: Sequence[str] = (), hidden: Iterable[str] = ()
) -> Built:
    """The profile of these memories: pinned facts first, then the ranked ones, within ``budget`` tokens."""
    chosen: list[Fact] = []
    used = 0
    candidates = [Fact(text, pinned=True) for text in pinned if text.strip()]
    candidates += _ranked(memories, frozenset(hidden))
    for fact in candidates:
        # Lines join with "\n", which tokenizes on its own after a line's end: costs add up.
        cost = count_tokens_memo(fact_line(fact.text)) + (1 if chosen else 0)
        if used + cost <= budget:
            chosen.append(fact)
            used += cost
    text = render(chosen)
    token_count = count_tokens(text)
    while token_count > budget and chosen:  # only if the additive count above was wrong
        chosen.pop()
        text = render(chosen)
        token_count = count_tokens(text)
    return Built(facts=chosen, text=text, token_count=token_count)

"""Changes of mind in the user's words, and the existing memory each one replaces (rule path).

"I switched from black to ruff", "I no longer drink green tea", "actually, we deploy on
Wednesdays now", "from now on I want tabs": a clause that says something stopped being true
names or implies the old statement. ``read_change`` reads such a clause; a :class:`Matcher`
finds the user's memory it replaces, trying in turn:

1. the old words the user named ("black", "drink green tea"): the memory holding the most of
   them (at least half, and no other memory as many);
2. a slot both statements fill ("the user lives in ...", "the user's timezone is ..."): a
   person lives in one place, so a new value replaces the old one even without "now";
3. a value of the same kind swapped for another ("Thursdays" -> "Wednesdays", "tabs" ->
   "spaces", "junior" -> "senior") in a memory on the same topic, when the clause signals a
   change ("actually", "now", "from now on", "anymore"...);
4. when the caller can look vectors up, the nearest memory to the old statement, for named
   old words that no memory spells out ("drive to work" -> "commutes to work by car").

Unsure means no supersede: the new statement is then written as a plain new memory. When the
clause alone is not a full statement ("I've gone back to spaces", "it's amoxicillin, not
penicillin"), the successor is the old memory with the old value replaced by the new one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from capture.text import conjugate, finish_sentence, third_person, word_set

_I = re.IGNORECASE
_T = TypeVar("_T")


@dataclass(frozen=True)
class Known:
    """An existing memory of the user that a change may replace."""

    id: str
    content: str
    kind: str = ""
    category: str = ""
    scope: str = "user"


@dataclass(frozen=True)
class Change:
    """What a clause says stopped being true (``old``) and what replaces it (``new``)."""

    old: str = ""
    new: str = ""
    # The clause alone is no full statement: rewrite the old memory with ``new`` for ``old``.
    elliptical: bool = False
    # Only named what stopped ("no longer X"); the next clause may say what replaced it.
    ending: bool = False
    # ``old`` names the topic ("standup"), not the old value: swap the value of ``new``'s kind.
    topic: bool = False


@dataclass(frozen=True)
class Successor:
    """The memory a change replaces, and the successor's text when it is rewritten from it."""

    memory: Known
    content: str | None = None


# Words that carry no topic: pronouns, articles, prepositions, auxiliaries, light verbs, and the
# "the user"/"the team" every memory starts with.
_STOP = word_set(
    """a an the and or but of to in on at by for with from as into onto over about than then so that this these
    those it its i i'm i've me my mine we we're our us you your he she they them their his her is are was were be
    been being am do does did done have has had having will would shall should can could may might must not no
    never now just also still only really very much more most some any all every each other user user's team
    team's assistant use uses used using prefer prefers preferred like likes want wants get gets got make makes
    go goes going went take takes keep keeps put puts write writes run runs set sets way thing things stuff
    anymore longer again back there here when where which who what how always usually mostly instead"""
)
# Kinds of values: a change swaps one for another of the same kind. Multi-word values first.
_VALUE_KINDS: dict[str, tuple[str, ...]] = {
    "weekday": (
        "mondays",
        "tuesdays",
        "wednesdays",
        "thursdays",
        "fridays",
        "saturdays",
        "sundays",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "weekends",
        "weekdays",
    ),
    "os": ("windows", "linux", "macos", "mac os", "ubuntu", "fedora", "debian", "arch linux", "chromeos"),
    "editor": ("neovim", "vim", "emacs", "vs code", "vscode", "intellij", "pycharm", "sublime text", "helix", "zed"),
    "formatter": ("ruff format", "black", "yapf", "autopep8", "prettier"),
    "js-packages": ("pnpm", "npm", "yarn", "bun"),
    "py-packages": ("poetry", "uv", "pipenv", "pip", "conda", "pdm"),
    "tests": ("pytest", "unittest", "nose", "jest", "vitest", "mocha"),
    "indentation": ("tabs", "spaces"),
    "mode": ("dark mode", "light mode", "dark", "light"),
    "length": ("short", "long", "brief", "detailed", "concise", "verbose", "shorter", "longer"),
    "seniority": ("junior", "senior", "lead", "staff", "principal", "intern", "mid-level"),
    "database": ("postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb", "dynamodb", "oracle"),
    "hosting": ("heroku", "fly.io", "vercel", "netlify", "render", "aws", "gcp", "azure", "kubernetes"),
    "diet": ("vegetarian", "vegan", "pescatarian", "omnivore"),
    "count": ("one", "two", "three", "four", "five", "six"),
}
# Kinds whose values name the thing on their own: no shared topic word is needed.
_SELF_EVIDENT = frozenset({"os", "editor", "formatter", "js-packages", "py-packages", "tests", "database", "hosting"})
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b", _I)
_VALUE = {
    kind: re.compile(r"(?<![\w.-])(?:" + "|".join(re.escape(v) for v in values) + r")(?![\w-])", _I)
    for kind, values in _VALUE_KINDS.items()
}

_SUBJECT = r"(?P<subject>i|we|the team|my\s+[a-z]+)"
_HAVE = r"(?:'ve|'s| have| has)?"
_SOON = r"(?:\s+(?:just|recently|finally|already|also|now|since|officially))*"
# What may trail a change: when it happened or what it is for ("last week", "for all my tests").
_TAIL = (
    r"(?P<tail>,?\s+(?:last|this|in|a|an|two|three|few|since|yesterday|earlier|recently|for|on|at|because|"
    r"as of|starting|from|it's|it is)\b.*)?"
)
_SWITCH_VERBS = r"(?:switched|moved|migrated|changed|converted|gone|went|transitioned|swapped)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _I))
    for name, pattern in (
        (
            "from-to",
            rf"^{_SUBJECT}{_HAVE}{_SOON}\s+{_SWITCH_VERBS}\s+(?P<what>(?:(?!from\b)[\w./-]+\s+){{0,4}}?)"
            rf"(?:over\s+)?from\s+(?P<old>.+?)\s+(?:over\s+|back\s+)?to\s+(?P<new>.+?){_TAIL}$",
        ),
        (
            "replaced",
            rf"^{_SUBJECT}{_HAVE}{_SOON}\s+replaced\s+(?P<old>.+?)\s+with\s+(?P<new>.+?){_TAIL}$",
        ),
        (
            "to",
            rf"^{_SUBJECT}{_HAVE}{_SOON}\s+(?:switched|changed|gone|went|converted|migrated)\s+"
            rf"(?:back\s+|over\s+)*to\s+(?P<new>.+?){_TAIL}$",
        ),
        ("no-longer", rf"^{_SUBJECT}(?:'m| am|'re| are| is)?\s+no\s+longer\s+(?P<old>.+)$"),
        ("not-anymore", rf"^{_SUBJECT}(?:'m| am|'re| are| is)\s+not\s+(?P<old>.+?)\s+any\s?more$"),
        ("dont-anymore", rf"^{_SUBJECT}\s+(?:don't|do not|dont|doesn't|does not)\s+(?P<old>.+?)\s+any\s?more$"),
        ("stopped", rf"^{_SUBJECT}{_HAVE}\s+(?:stopped|quit|given up|gave up|dropped)\s+(?P<old>.+)$"),
        (
            "its-not",
            r"^(?:it's|it is|it was|that's|that is)\s+(?P<new>.+?),?\s+not\s+(?P<old>[^,]+)$",
        ),
        (
            "moved-value",
            r"^(?:the\s+|our\s+|my\s+)?(?P<what>[a-z][\w -]{1,40}?)\s+(?:has\s+|was\s+|is\s+|got\s+|has been\s+)?"
            rf"(?:moved|changed|shifted|pushed|rescheduled)\s+(?:back\s+)?to\s+(?P<new>.+?){_TAIL}$",
        ),
    )
)
# "X, not Y" at the end of a full statement: Y is what it replaces.
_NOT_OLD = re.compile(r",\s+not\s+(?P<old>[^,]{1,60})$", _I)
_DROPPED = re.compile(
    r"\b(?:drop|dropped|ditch|ditched|quit|gave up|got rid of|moved off|migrat(?:ed|ing) off|moved away from|"
    r"switched away from|stopped using)\s+(?P<old>[\w.+#-]+(?:\s+(?!to\b|for\b|and\b)[\w.+#-]+)?)",
    _I,
)
_INSTEAD = re.compile(r"\binstead of\s+(?P<old>[^,]{1,60}?)(?:\s+(?:now|anymore|any more))?$", _I)
# Where an elliptical new value ends: "amoxicillin I'm allergic to", "John with an h".
_VALUE_END = re.compile(r"\s+(?:i|i'm|we|with|that|which|who|for|because|as|and|but)\b.*$", _I)


def read_change(clause: str) -> tuple[str, Change] | None:
    """``(third-person statement, change)`` when ``clause`` says something stopped being true."""
    for name, pattern in _PATTERNS:
        match = pattern.match(clause.rstrip(" .!"))
        if match is None:
            continue
        groups = {k: (v or "").strip() for k, v in match.groupdict().items()}
        old, new = groups.get("old", ""), groups.get("new", "")
        if name == "from-to" or name == "replaced":
            subject = third_person(groups["subject"])
            what = f" {groups['what']}" if groups.get("what") else ""
            return f"{subject} switched{third_person(what)} from {old} to {new}", Change(old, new, elliptical=True)
        if name == "to":
            return third_person(clause), Change(new=new, elliptical=True)
        if name == "no-longer" or name == "stopped":
            return third_person(clause), Change(old=old, ending=True)
        if name == "not-anymore":
            return f"{third_person(groups['subject'])} is no longer {third_person(old)}", Change(old=old, ending=True)
        if name == "dont-anymore":
            verb, _, rest = old.partition(" ")
            statement = f"{third_person(groups['subject'])} no longer {conjugate(verb)} {third_person(rest)}"
            return statement.strip(), Change(old=old, ending=True)
        if name == "its-not":
            value = _VALUE_END.sub("", new)
            return "", Change(old=old, new=value, elliptical=True)
        if name == "moved-value":
            return "", Change(old=groups["what"], new=new, elliptical=True, topic=True)
    return None


def named_old(clause: str) -> str:
    """The old value a full statement names: "I use pnpm instead of npm", "... with Helm, not Kustomize",
    "we dropped fly.io, moving everything to hetzner"."""
    text = clause.rstrip(" .!")
    match = _INSTEAD.search(text) or _NOT_OLD.search(text) or _DROPPED.search(text)
    return match["old"].strip() if match else ""


_NEW_VALUE = re.compile(
    r"\b(?:(?:moving|moved|switching|switched|migrating|migrated|going|gone|changed)\s+(?:everything\s+|it\s+|all\s+|"
    r"over\s+|back\s+)*to|using|doing|running\s+(?:everything\s+|it\s+|all\s+)?(?:in|on))\s+"
    r"(?:a\s+|an\s+|the\s+)?(?P<new>[\w.+#-]+)"
    r"|\b(?:i|he|she|they|we)(?:'s|'m|'re|\s+is|\s+am|\s+are)\s+(?:now\s+)?(?P<state>[\w-]+)\s+now\b",
    _I,
)
_NOT_ANYMORE = re.compile(r"\bnot\s+(?P<old>[\w-]+)\s+any\s?more\b", _I)


def message_change(text: str) -> Change | None:
    """What a whole message says replaced what, when its clauses are no statements of their own:
    "we had to drop launchdarkly, too expensive. using unleash self hosted now"."""
    old = ""
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        old = old or named_old(sentence) or ((m := _NOT_ANYMORE.search(sentence)) and m["old"]) or ""
    if not old:
        return None
    for match in _NEW_VALUE.finditer(text):
        new = match["new"] or match["state"]
        if new and new.lower() not in old.lower() and new.lower() not in _STOP:
            return Change(old=old, new=new, elliptical=True)
    return None


class Matcher:
    """Finds the memory a change replaces among ``existing`` (see the module docstring).

    ``nearest`` looks a statement up by meaning and answers a memory id (the caller applies
    its similarity threshold), or None. Each memory is replaced at most once.
    """

    def __init__(self, existing: Sequence[Known], nearest: Callable[[str], str | None] | None = None) -> None:
        self.existing = list(existing)
        self.nearest = nearest
        self.used: set[str] = set()

    def find(self, content: str, change: Change | None, *, signalled: bool) -> Successor | None:
        candidates = [m for m in self.existing if m.id not in self.used]
        if not candidates:
            return None
        found = (
            self._by_words(candidates, content, change)
            or self._by_slot(candidates, content)
            or (self._by_value(candidates, content, change) if signalled or change else None)
            or self._by_meaning(candidates, change)
        )
        if found is not None:
            self.used.add(found.memory.id)
        return found

    def _by_words(self, candidates: list[Known], content: str, change: Change | None) -> Successor | None:
        old = change.old if change else ""
        if not old:
            return None
        words = _salient(old)
        if not words:
            return None
        scored = [(_coverage(words, m.content), _coverage(_salient(content), m.content), m) for m in candidates]
        scored = [s for s in scored if s[0] >= 0.5]
        best = _unique_best(scored)
        if best is None:
            return None
        if not (change and change.elliptical):
            return Successor(best)
        rewritten = _swap(best.content, change.new) if change.topic else _rewrite(best.content, old, change.new)
        return Successor(best, rewritten)

    def _by_slot(self, candidates: list[Known], content: str) -> Successor | None:
        slot = _slot(content)
        if slot is None:
            return None
        same = [m for m in candidates if _slot(m.content) == slot]
        return Successor(same[0]) if len(same) == 1 else None

    def _by_value(self, candidates: list[Known], content: str, change: Change | None) -> Successor | None:
        text = change.new if change and change.elliptical and change.new else content
        new_values = _values(text)
        if not new_values:
            return None
        topic = _salient(content) - {v.lower() for _, v in new_values}
        scored = []
        for memory in candidates:
            for kind, new in new_values:
                olds = [v for k, v in _values(memory.content) if k == kind and v.lower() != new.lower()]
                if not olds:
                    continue
                overlap = _coverage(topic, memory.content) if topic else 0.0
                # "I've gone back to spaces" names no topic: the one memory with a value of that
                # kind is it (two such memories tie, and nothing is replaced).
                elliptical = change is not None and change.elliptical
                if overlap > 0 or kind in _SELF_EVIDENT or elliptical:
                    rewritten = _rewrite(memory.content, olds[0], new) if change and change.elliptical else None
                    scored.append((overlap, 0.0, (memory, rewritten)))
                break
        best = _unique_best(scored)
        return None if best is None else Successor(best[0], best[1])

    def _by_meaning(self, candidates: list[Known], change: Change | None) -> Successor | None:
        if self.nearest is None or change is None or not change.old or change.elliptical and not change.new:
            return None
        memory_id = self.nearest(finish_sentence(third_person(f"I {change.old}" if change.ending else change.old)))
        memory = next((m for m in candidates if m.id == memory_id), None)
        return None if memory is None else Successor(memory)


def _unique_best(scored: list[tuple[float, float, _T]]) -> _T | None:
    """The item with the highest (score, tie-break); None when another item ties with it."""
    if not scored:
        return None
    scored = sorted(scored, key=lambda s: (s[0], s[1]), reverse=True)
    if len(scored) > 1 and scored[0][:2] == scored[1][:2]:
        return None
    return scored[0][2]


def _salient(text: str) -> set[str]:
    words = (w.rstrip(".-/") for w in re.findall(r"[a-z0-9][a-z0-9.+#/-]*", text.lower()))
    return {w for w in words if w not in _STOP and len(w) > 1}


def _coverage(words: set[str], content: str) -> float:
    """Share of ``words`` that ``content`` holds (a word of 5+ letters also by its first 4-5: "drinks")."""
    if not words:
        return 0.0
    present = _salient(content)
    stems = {w[: max(4, len(w) - 2)] for w in present if len(w) >= 5}
    hits = sum(1 for w in words if w in present or (len(w) >= 5 and w[: max(4, len(w) - 2)] in stems))
    return hits / len(words)


def _values(text: str) -> list[tuple[str, str]]:
    """``(kind, value)`` of every known kind of value in ``text``, in the order of the kinds."""
    found = [(kind, m.group()) for kind, pattern in _VALUE.items() for m in pattern.finditer(text)]
    found += [("time", m.group()) for m in _TIME.finditer(text)]
    return found


_SLOTS = (
    ("location", re.compile(r"^the user (?:lives|is based|is located|resides)\s+(?:in|near)\b", _I)),
    ("employer", re.compile(r"^the user (?:works|is working)\s+(?:at|for)\b", _I)),
    ("name", re.compile(r"^the user(?:'s name is| wants to be called)\b", _I)),
)
_POSSESSIVE_SLOT = re.compile(
    r"^the (?P<owner>user|team)'s\s+(?:(?P<adjective>favou?rite|preferred|main|primary|default|usual)\s+)?"
    r"(?:[\w-]+\s+){0,2}?(?P<noun>timezone|time zone|editor|ide|shell|os|language|title|role|birthday|employer|"
    r"company|city|country|handle|pronouns|stack|framework|database|terminal|laptop|name)\s+(?:is|are)\b",
    _I,
)


def _slot(content: str) -> str | None:
    """The single-valued slot a third-person statement fills, if any ("location", "user:timezone")."""
    for name, pattern in _SLOTS:
        if pattern.match(content):
            return name
    match = _POSSESSIVE_SLOT.match(content)
    if match is None:
        return None
    noun = "name" if match["noun"].lower() == "name" and match["owner"] == "user" else match["noun"].lower()
    adjective = (match["adjective"] or "").lower().replace("favourite", "favorite")
    return f"{match['owner'].lower()}:{adjective}:{noun}".replace("time zone", "timezone")


def _swap(content: str, new: str) -> str | None:
    """``content`` with its first value of ``new``'s kind replaced by ``new``, if it has one."""
    kinds = {kind for kind, _ in _values(new)}
    old = next((v for kind, v in _values(content) if kind in kinds and v.lower() != new.lower()), None)
    return None if old is None else _rewrite(content, old, new)


def _rewrite(content: str, old: str, new: str) -> str | None:
    """``content`` with ``old`` replaced by ``new`` (whole words, any case); None if it is not there."""
    if not old or not new:
        return None
    pattern = re.compile(r"(?<![\w-])" + re.escape(old) + r"(?![\w-])", _I)
    if not pattern.search(content):
        return None
    return pattern.sub(lambda _: new, content)


# --- Read by consolidation (consolidation/reader.py): the same value kinds and slots --------

VALUE_KINDS: dict[str, tuple[str, ...]] = _VALUE_KINDS


def slot_and_value(content: str) -> tuple[str, str] | None:
    """The single-valued slot a third-person statement fills and the words filling it
    ("The user lives in Lisbon." -> ("location", "lisbon")), or None."""
    slot = _slot(content)
    if slot is None:
        return None
    for name, pattern in _SLOTS:
        if name == slot and (match := pattern.match(content)):
            return slot, content[match.end() :].strip(" .!").lower()
    match = _POSSESSIVE_SLOT.match(content)
    return slot, (content[match.end() :].strip(" .!").lower() if match else "")

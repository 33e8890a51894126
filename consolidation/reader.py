"""How consolidation reads a memory's content: :func:`read` turns it into a :class:`Reading` (whom it
is about, the single-valued slot it fills, the values and names it holds, its remaining words,
whether it negates or announces a change), with capture's value kinds and slot reading
(``capture/changes.py``) and the few spellings consolidation also meets in stored memories. Pure
text, no database; ``rules`` weighs two readings and their cosine into a verdict.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from capture.changes import VALUE_KINDS, slot_and_value
from capture.text import third_person, word_set

_I = re.IGNORECASE

# Capture's value kinds (``capture.changes``) and a few spellings consolidation also meets in
# stored memories; each value is read as its canonical form.
_EXTRA_VALUES: dict[str, tuple[str, ...]] = {
    "formatter": ("ruff",),
    "mode": ("dark theme", "dark themes", "light theme", "light themes"),
    "diet": ("omnivore",),
    "shell": ("bash", "zsh", "fish", "powershell", "nushell"),
}
_CANONICAL = {
    "ruff format": "ruff",
    "dark mode": "dark",
    "dark theme": "dark",
    "dark themes": "dark",
    "light mode": "light",
    "light theme": "light",
    "light themes": "light",
    "postgres": "postgresql",
    "vscode": "vs code",
    "mac os": "macos",
    "mondays": "monday",
    "tuesdays": "tuesday",
    "wednesdays": "wednesday",
    "thursdays": "thursday",
    "fridays": "friday",
    "saturdays": "saturday",
    "sundays": "sunday",
    "shorter": "short",
    "brief": "short",
    "concise": "short",
    "longer": "long",
    "detailed": "long",
    "verbose": "long",
}
_KINDS: dict[str, tuple[str, ...]] = {
    kind: tuple(sorted({*VALUE_KINDS.get(kind, ()), *_EXTRA_VALUES.get(kind, ())}, key=len, reverse=True))
    for kind in {*VALUE_KINDS, *_EXTRA_VALUES}
}
# Each value (lower case) and its kind; values are found by their words, longest first.
_VALUE_KIND: dict[str, str] = {}
for _kind in sorted(_KINDS):
    for _value in _KINDS[_kind]:
        _VALUE_KIND.setdefault(_value.lower(), _kind)
# The first word of each value of several words, and the most words a value has.
_LONGER: dict[str, int] = {}
for _value in _VALUE_KIND:
    if " " in _value:
        _LONGER[_value.split()[0]] = max(_LONGER.get(_value.split()[0], 1), len(_value.split()))
_WORD = re.compile(r"[\w.+#/'’-]+")
_TIME = re.compile(r"\b(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s?(?P<ampm>am|pm)\b|\b(?P<h2>\d{1,2}):(?P<m2>\d{2})\b", _I)
# Words naming the kind a value is of: "a vegetarian diet" says no more than "vegetarian".
_KIND_WORDS = {
    "formatter": word_set("format formatter formatting formats formatted"),
    "editor": word_set("editor editors ide"),
    "os": word_set("os system operating"),
    "diet": word_set("diet eater"),
    "database": word_set("database db"),
    "hosting": word_set("hosting host hosted deploy deploys deployed deploying deployment"),
    "js-packages": word_set("package packages dependencies manager"),
    "py-packages": word_set("package packages dependencies manager"),
    "tests": word_set("test tests testing"),
    "indentation": word_set("indent indents indentation indenting"),
    "mode": word_set("mode theme themes"),
    "shell": word_set("shell"),
    "length": word_set("answer answers reply replies response responses"),
}

# Whom a statement is about when it is not the user: "the user's son plays guitar".
_RELATIONS = word_set(
    """mother mom mum father dad parent parents sister brother sibling siblings son daughter child children kid
    kids wife husband partner spouse girlfriend boyfriend fiance fiancee grandmother grandfather grandma grandpa
    aunt uncle cousin niece nephew friend colleague coworker boss manager neighbour neighbor dog cat pet puppy
    kitten"""
)
# Relations and attributes a person has one of at a time: "the user's partner is Sam", then "... is Alex".
_SINGLE = word_set(
    """partner wife husband spouse girlfriend boyfriend manager boss lead timezone zone title role job employer
    company editor ide os shell terminal laptop machine phone desktop city country location address name
    pronouns handle username birthday age diet stack day"""
)
_SINGLE_ADJECTIVES = word_set("favourite favorite preferred main primary default usual current")
_COPULA = word_set("is are was were")

# Rewrites before reading, so that two ways of saying one thing read the same.
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, _I), replacement)
    for pattern, replacement in (
        (r"\bthe user['’]s (\w+)(?:['’]s name is| is called| is named| goes by)\s+", r"the user has a \1 named "),
        (r"^the user reports to\s+", "the user's manager is "),
        (r"\beats meat\b", "is omnivore"),
        (r"\bthe user['’]s (\w+(?: \w+)?) of choice\b", r"the user's \1"),
    )
)
_SYNONYMS = {
    "kids": "children",
    "kid": "child",
    "mom": "mother",
    "mum": "mother",
    "dad": "father",
    "js": "javascript",
    "ts": "typescript",
    "k8s": "kubernetes",
    "replies": "answer",
    "reply": "answer",
    "responses": "answer",
    "response": "answer",
    "answers": "answer",
    "dependencies": "package",
    "packages": "package",
    "employed": "work",
    "raised": "grew",
    "allergy": "allergic",
    "allergies": "allergic",
    "hosting": "deploy",
    "hosted": "deploy",
    "host": "deploy",
}
_STOP = word_set(
    """a an the and or but of to in on at by for with from as into onto over about than then so that this these those
    it its i i'm i've me my mine we our us you your he she they them their his her is are was were be been being am
    do does did done have has had having will would shall should can could may might must user user's team team's
    assistant use uses used using prefer prefers preferred like likes liked want wants wanted love loves enjoy
    enjoys also still really very much always usually mostly generally typically every all each any some just
    rather instead up out follow follows following manage manages managed get gets got keep keeps there here
    which who what how when where per go goes going went"""
)
# Words that announce a change (``_CHANGE``) say nothing of the fact itself.
_CHANGE_WORDS = word_set(
    """now nowadays these days anymore any more no longer switched switch switching moved move moving migrated
    migrate changed change became become started start starting went gone back again recently instead replaced
    dropped"""
)
_NEGATION_WORDS = word_set("not no never doesn't don't isn't aren't cannot can't didn't won't wasn't")
# A newer statement announcing that something changed.
_CHANGE = re.compile(
    r"\b(?:now|nowadays|these days|any ?more|no longer|switched|switching|moved|migrated|changed|became|become|"
    r"started|starting|promoted|went back|gone back|going back|from now on|new job|instead|replaced|dropped|quit)\b",
    _I,
)
_NEGATION = re.compile(r"\b(?:not|no longer|never|doesn't|does not|don't|do not|isn't|cannot|can't|stopped|quit)\b", _I)
# "X over Y", "X rather than Y", "X instead of Y", "X, not Y", "from Y to X": Y is not the user's value.
_REJECTED = re.compile(
    r"\b(?:over|rather than|instead of|not)\s+(?P<after>[\w./ -]{1,30}?)(?=[,.;]|$|\s+(?:for|in|on|at|when)\b)"
    r"|\bfrom\s+(?P<from>[\w./ -]{1,30}?)\s+to\b",
    _I,
)
_LOCATION = re.compile(
    r"^(?:lives|is living|is based|is located|resides|has moved|moved|has relocated|relocated|is moving)\s+"
    r"(?:in|to|near|out to)\s+(?P<value>.+)$",
    _I,
)
_EMPLOYER = re.compile(
    r"^(?:works|is working|has started|started|is starting|joined|has joined|is employed)\s+"
    r"(?:a new job\s+|a new role\s+|working\s+)?(?:at|for|by)\s+(?P<value>.+)$"
    r"|^(?:joined|has joined)\s+(?P<joined>[A-Z][\w.&-]*(?:\s+[A-Z][\w.&-]*)*)",
)
_VALUE_TAIL = re.compile(
    r"\s*(?:,.*|\b(?:now|nowadays|these days|last|this|since|as of|for|as|from|in \d{4}|recently|again|"
    r"any ?more|with|and|but|because|while|when|who|which|where|near)\b.*)$",
    _I,
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.'’/+#-]*")
_NUMBER_WORDS = word_set("one two three four five six seven eight nine ten twice once")


@dataclass(frozen=True)
class Reading:
    """What a memory's content says, as the rules compare it."""

    text: str
    # Whom it is about when not the user ("son", "mother"); "" for the user (or the team).
    subject: str = ""
    # The single-valued slot it fills ("location", "timezone", "partner") and its value.
    slot: str = ""
    slot_value: str = ""
    # Values of known kinds it holds ({"formatter": {"ruff"}}), and those it rejects ("over Y").
    values: dict[str, frozenset[str]] = field(default_factory=dict)
    rejected: frozenset[str] = frozenset()
    # Proper names, numbers and times: two statements with different ones are different facts.
    names: frozenset[str] = frozenset()
    # The remaining content words, stemmed; and every word of the statement in order (lower
    # case, stem), to tell a qualifier ("in the terminal", "green tea") from a rewording.
    words: frozenset[str] = frozenset()
    sequence: tuple[tuple[str, str], ...] = ()
    negated: bool = False
    changed: bool = False


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A crude stem: "formats", "formatting", "formatted" -> "format"; "lives", "live" -> "liv"."""
    word = _SYNONYMS.get(word, word)
    for _ in range(2):
        for suffix in ("ation", "ing", "ies", "es", "ed", "s", "e"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
                word = word[: -len(suffix)]
                if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2]:
                    word = word[:-1]
                break
        else:
            break
    return word


@functools.lru_cache(maxsize=65536)
def read(content: str) -> Reading:
    """The reading of one memory's content (see :class:`Reading`); a process keeps its last
    readings, so a run reads again only what changed since the last one."""
    text = " ".join(third_person(content.strip()).split()).rstrip(" .!")
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    changed = bool(_CHANGE.search(text))
    negated = bool(_NEGATION.search(text))
    rejected = _rejected(text)
    values: dict[str, set[str]] = {}
    # "no longer" is no length of anything.
    kept = re.sub(r"\b(?:no|any) longer\b", " ", text, flags=_I)
    spans = _find_values(kept)
    for _, _, kind, value in spans:
        if value not in rejected:
            values.setdefault(kind, set()).add(value)
    for start, end, _, _ in reversed(spans):
        kept = f"{kept[:start]} {kept[end:]}"
    times = {_time(m) for m in _TIME.finditer(kept)}
    kept = _TIME.sub(" ", kept)
    subject, slot, slot_value, _ = _subject_and_slot(text)
    if not slot and (capture_slot := slot_and_value(text)):
        slot, slot_value = _slot_name(capture_slot[0]), _clean_value(capture_slot[1])
    names, words = _names_and_words(_subject_and_slot(kept)[3], values)
    return Reading(
        text=text,
        subject=subject,
        slot=slot,
        slot_value=slot_value,
        values={kind: frozenset(found) for kind, found in values.items()},
        rejected=frozenset(rejected),
        names=frozenset(names | times),
        words=frozenset(words),
        sequence=tuple((token.lower(), stem(token.lower())) for token in _TOKEN.findall(text)),
        negated=negated,
        changed=changed,
    )


def _find_values(text: str) -> list[tuple[int, int, str, str]]:
    """``(start, end, kind, canonical value)`` of every known value in ``text``, left to right."""
    words = []
    for match in _WORD.finditer(text):
        word = match.group().lower().rstrip(".,;:!?'’")
        if word:
            words.append((match.start(), match.start() + len(word), word))
    found = []
    index = 0
    while index < len(words):
        longest = _LONGER.get(words[index][2], 1)
        for size in range(min(longest, len(words) - index), 0, -1):
            phrase = words[index][2] if size == 1 else " ".join(word for _, _, word in words[index : index + size])
            kind = _VALUE_KIND.get(phrase)
            if kind is not None:
                found.append((words[index][0], words[index + size - 1][1], kind, _CANONICAL.get(phrase, phrase)))
                index += size
                break
        else:
            index += 1
    return found


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match["h"] or match["h2"]), match["m"] or match["m2"] or "00"
    if (match["ampm"] or "").lower() == "pm" and hour < 12:
        hour += 12
    return f"{hour}:{minute}"


def _rejected(text: str) -> set[str]:
    found = set()
    for match in _REJECTED.finditer(text):
        phrase = (match["after"] or match["from"] or "").lower()
        found |= {value for _, _, _, value in _find_values(phrase)}
    return found


_POSSESSIVE = re.compile(r"^(?:the user|the team|user|team)['’]s\s+(?P<rest>.+)$", _I)
_OWNER = re.compile(r"^(?:the user|the team|user|team)\s+(?P<rest>.+)$", _I)


def _subject_and_slot(text: str) -> tuple[str, str, str, str]:
    """``(subject, slot, slot value, predicate)`` of a third-person statement."""
    possessive = _POSSESSIVE.match(text)
    if possessive is None:
        owner = _OWNER.match(text)
        predicate = owner["rest"] if owner else text
        return "", *_predicate_slot(predicate), predicate
    tokens = possessive["rest"].split()
    # The noun phrase runs up to the verb: a copula, or a word ending in "s" after the first word.
    end = next(
        (
            i
            for i, token in enumerate(tokens)
            if i > 0 and (token.lower() in _COPULA or (token.lower().endswith("s") and token.lower() not in _RELATIONS))
        ),
        len(tokens),
    )
    noun, rest = [t.lower() for t in tokens[:end]], tokens[end:]
    if not noun or not rest:
        return "", "", "", possessive["rest"]
    head = _SYNONYMS.get(noun[-1], noun[-1])
    predicate = " ".join(rest)
    is_copula = rest[0].lower() in _COPULA
    value = _clean_value(" ".join(rest[1:]))
    single = head in _SINGLE or any(word in _SINGLE_ADJECTIVES for word in noun)
    if is_copula and single and value and not _NEGATION.search(predicate):
        slot = " ".join(n.replace("favourite", "favorite") for n in noun)
        return "", slot, value, f"{' '.join(noun)} {predicate}"
    if head in _RELATIONS:
        # "the user's mother lives in Madrid": a statement about the mother.
        return head, *_predicate_slot(predicate), predicate
    return "", "", "", f"{' '.join(noun)} {predicate}"


def _clean_value(value: str) -> str:
    """A slot's value without what may trail or lead it: "now a MacBook Air, mostly" -> "macbook air"."""
    value = re.sub(r"^(?:(?:now|currently|still|a|an|the)\s+)+", "", value.strip(), flags=_I)
    return _VALUE_TAIL.sub("", value).strip(" .,").lower()


def _slot_name(name: str) -> str:
    """Capture's slot names ("user:favorite:database") as this module names slots ("favorite database")."""
    parts = [part for part in name.split(":") if part and part not in ("user", "team")]
    return " ".join(parts)


_NAMED = re.compile(r"^has an? (?P<noun>[\w-]+) (?:named|called) (?P<value>.+)$", _I)


def _predicate_slot(predicate: str) -> tuple[str, str]:
    named = _NAMED.match(predicate)
    if named is not None and _SYNONYMS.get(named["noun"].lower(), named["noun"].lower()) in _SINGLE:
        return named["noun"].lower(), _clean_value(named["value"])
    for slot, pattern in (("location", _LOCATION), ("employer", _EMPLOYER)):
        match = pattern.match(predicate)
        if match is not None:
            value = _clean_value(match.groupdict().get("joined") or match["value"] or "")
            # A location is a place's name: "moved to pytest" is no move.
            if value and (slot != "location" or value[:1].isalpha()):
                return slot, value
    return "", ""


_KIND_STEMS = {kind: frozenset(stem(word) for word in words) for kind, words in _KIND_WORDS.items()}


def _names_and_words(predicate: str, values: dict[str, set[str]]) -> tuple[set[str], set[str]]:
    names: set[str] = set()
    words: set[str] = set()
    implied: set[str] = set().union(*(_KIND_STEMS.get(kind, frozenset()) for kind in values)) if values else set()
    for position, token in enumerate(_TOKEN.findall(predicate)):
        plain = token.lower().rstrip(".'’")
        plain = plain[:-2] if plain.endswith(("'s", "’s")) else plain
        if not plain or plain in _STOP or plain in _CHANGE_WORDS or plain in _NEGATION_WORDS:
            continue
        plain = _SYNONYMS.get(plain, plain)
        proper = token[:1].isupper() and position > 0 and plain not in _RELATIONS
        if proper or any(c.isdigit() for c in plain) or "/" in plain or "." in plain or plain in _NUMBER_WORDS:
            names.add(_SYNONYMS.get(plain, plain))
        elif stem(plain) not in implied:
            words.add(stem(plain))
    return names, words

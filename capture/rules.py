"""Rule-based memory extraction, used when no LLM is configured.

Only the user's words are mined (assistant text is the agent's, not the user's). Each user
message is split into sentences, then clauses ("I'm Dana, and I work at Acme" is two facts).
Questions, hypotheticals, doubts and sentences holding a secret are skipped whole. Leading
*markers* set how a clause is read: "actually," / "no," (a correction), "remember that",
"note that", "important:", "key insight", "the conclusion is", "from now on", and context
such as "in this repo," (kept in the memory, which becomes project-scoped). The first rule
that matches turns the clause into a third-person memory; a marked clause no rule knows is
kept when it reads as a statement. Vague ("let's go with that"), transient ("for now"), too
short or too long clauses are dropped, and each memory is kept once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capture.proposals import ProposedMemory
from capture.redaction import find_secrets
from capture.text import (
    clip,
    finish_sentence,
    is_hedged,
    is_question,
    is_specific,
    is_technical,
    is_transient,
    is_vague,
    lower_first,
    reads_as_statement,
    split_sentences,
    strip_fillers,
    third_person,
    word_set,
)

_I = re.IGNORECASE
_ADV = r"(?:\s+(?:really|much|strongly|generally|usually|definitely|personally|also|still|always|mostly|totally))*"
_HABIT = r"(?:\s+(?:always|never|usually|generally|typically|normally|mostly))+"
_PARTICLE = re.compile(r"^(?:(?:to|on|that|with|for|about|using)\s+)+", _I)
_CLAUSE_SPLIT = re.compile(
    r"\s*(?:;|,\s+so\s+|(?:,?\s+(?:and|but|plus)\s+(?:also\s+)?|,\s+)"
    r"(?=(?:i|i'm|i've|i'd|i'll|we|we're|we've|we'll|my|our|the team|please|let's)\b)"
    r"|,\s+(?=(?:use|always|never|don't|do not)\b))",
    _I,
)
_TEAM = re.compile(r"\b(?:the team|the team's|(?:this|the) (?:repo|repository|project|codebase|monorepo))\b", _I)
_DECISION_WORDS = re.compile(r"\b(?:decided|agreed|chose|settled on|will use|is going to use|decision)\b", _I)
_PREFERENCE_WORDS = re.compile(
    r"\b(?:prefers|likes|loves|hates|dislikes|would rather|wants the assistant|"
    r"does not want the assistant)\b",
    _I,
)
_PROFILE_NOUNS = word_set(
    """timezone zone name role title job team company employer editor ide os shell terminal laptop machine stack
    language languages pronouns handle username location city country background specialty specialisation
    specialization focus framework database setup workflow level experience"""
)
_PROFILE_ADJECTIVES = ("preferred", "favorite", "favourite", "main", "primary", "usual", "default", "native")
_NOT_IMPERATIVE = word_set(
    "mind heard seen thought knew again ever worry bother know think care be get apologize "
    "apologise panic forget hesitate"
)
_MIN_CHARS, _MAX_CHARS, _MIN_WORDS, _MAX_WORDS = 12, 300, 2, 45


@dataclass(frozen=True)
class _Reading:
    """How a clause is read: labels ("" = infer from the content) and where they come from."""

    kind: str = ""
    category: str = ""
    scope: str = ""
    importance: float = 0.5
    confidence: float = 0.7
    reason: str = ""
    durable: bool = False
    explicit: bool = False
    prefix: str = ""


_Builder = Callable[[re.Match[str]], str | None]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    build: _Builder
    reading: _Reading
    needs_marker: bool = False
    needs_specific: bool = False


Rules = tuple[_Rule, ...]


def _whole(match: re.Match[str]) -> str:
    return third_person(match.string)


def _template(text: str) -> Callable[[re.Match[str]], str]:
    # Keyword groups ("Always", "Go with") are lower-cased; the rest keeps its capitals.
    return lambda m: text.format(
        **{k: third_person(v or "") if k == "rest" else (v or "").lower() for k, v in m.groupdict().items()}
    )


def _name(match: re.Match[str]) -> str:
    name = " ".join(w if w[0].isupper() else w.capitalize() for w in match["name"].split())
    return (
        "the user wants to be called "
        if match.string.lower().startswith(("call", "please", "you"))
        else "the user's name is "
    ) + name


def _profile(match: re.Match[str]) -> str | None:
    words = match["thing"].lower().split()
    if words[-1] not in _PROFILE_NOUNS and words[0] not in _PROFILE_ADJECTIVES:
        return None
    return third_person(match.string)


def _imperative(text: str) -> Callable[[re.Match[str]], str | None]:
    def build(match: re.Match[str]) -> str | None:
        first = match["rest"].split()[0].lower().strip(",.;:!")
        return None if first in _NOT_IMPERATIVE else _template(text)(match)

    return build


def _reading(kind: str, category: str, scope: str, importance: float, confidence: float, reason: str) -> _Reading:
    return _Reading(kind, category, scope, importance, confidence, reason)


_NAME = _reading("fact", "user-facts", "user", 0.6, 0.9, "The user said what to call them.")
_USER_FACT = _reading("fact", "user-facts", "user", 0.5, 0.8, "The user stated a fact about themselves.")
_PREFERENCE = _reading("preference", "?", "user", 0.6, 0.8, "The user stated a preference.")
_INSTRUCTION = _reading("preference", "?", "", 0.7, 0.8, "The user gave a standing instruction.")
_TEAM_DECISION = _reading("decision", "architectural-decisions", "project", 0.7, 0.8, "The team made a decision.")
_HEDGED_DECISION = dataclasses.replace(_TEAM_DECISION, scope="", confidence=0.6)
_OWN_DECISION = _reading("decision", "?decision", "user", 0.6, 0.75, "The user made a decision.")
_CONVENTION = _reading("fact", "project-conventions", "project", 0.7, 0.8, "The user described a team convention.")
_CLARIFICATION = _reading("fact", "corrections", "user", 0.4, 0.5, "The user clarified what they meant.")
_LESSON = _reading("note", "lesson", "", 0.6, 0.7, "The user shared a lesson learned.")

_WE = r"^(?:we|the team)"
_SWITCH = r"(?:go with|use|stick with|stick to|standardi[sz]e on|adopt|switch to|move to|migrate to|keep using)"
_IMPERATIVE_VERBS = (
    r"(?:use|prefer|avoid|write|put|keep|name|add|run|format|default to|stick to|stick with|call|place|prefix|"
    r"include|document|test|check|ask)\b"
)


def _rules(reading: _Reading, build: _Builder, *patterns: str, marker: bool = False, specific: bool = False) -> Rules:
    return tuple(_Rule(re.compile(p, _I), build, reading, marker, specific) for p in patterns)


# Order matters: the first rule whose pattern matches decides (habits before plain "I use").
_RULES: Rules = (
    *_rules(
        _NAME,
        _name,
        r"^(?:my name is|my name's|(?:please |you can )?call me)\s+(?P<name>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2})$",
        r"^i(?:'m| am)\s+(?P<name>(?-i:[A-Z])[\w'-]*)$",
    ),
    *_rules(_USER_FACT, _profile, r"^my\s+(?P<thing>(?:[\w-]+\s+){0,3}?[\w-]+)\s+(?:is|are)\s+(?P<rest>.+)"),
    *_rules(
        _PREFERENCE,
        _whole,
        rf"^i{_HABIT}\s+(?:use|write|run|put|keep|name|format|avoid|test|deploy|start|add|go|prefer)\b\s*(?P<rest>.+)",
        rf"^i{_ADV}\s+(?:prefer|like|love|hate|dislike|enjoy|detest|favou?r|can't stand|cannot stand|"
        r"don't like|do not like|don't want|do not want)\s+(?P<rest>.+)",
        rf"^i(?:'d| would){_ADV}\s+rather\s+(?P<rest>.+)",
        r"^i(?:'m| am)\s+(?:not\s+)?(?:a\s+)?(?:big\s+|huge\s+)?fan of\s+(?P<rest>.+)",
        r"^my\s+(?:personal\s+)?preference is\s+(?P<rest>.+)",
    ),
    *_rules(
        _USER_FACT,
        _whole,
        r"^i(?:'m| am)\s+an?\s+(?!(?:bit|little|lot|tad|moment|sec|second|minute)\b)(?P<rest>.+)",
        r"^i(?:\s+(?:currently|now))?\s+(?:work|live)\s+(?:at|for|as|in|on)\s+(?P<rest>.+)",
        r"^i(?:'m| am)\s+(?:based in|located in|from)\s+(?P<rest>.+)",
    ),
    *_rules(
        _USER_FACT,
        _whole,
        r"^i(?:'ve| have)\s+(?:been\s+(?:using|writing|coding|programming|working)\b|(?:over\s+|about\s+)?\d+\+?\s+"
        r"years?\b)\s*(?P<rest>.+)",
        r"^i(?:'m| am)\s+(?:on|using|running)\s+(?P<rest>.+)",
        r"^i\s+(?:use|code in|write|program in|develop (?:in|on|with))\s+(?P<rest>.+)",
        specific=True,
    ),
    *_rules(
        _INSTRUCTION,
        _imperative("the user wants the assistant to {adv} {rest}"),
        r"^(?:please\s+)?(?P<adv>always|never)\s+(?P<rest>.+)",
    ),
    *_rules(
        _INSTRUCTION,
        _imperative("the user does not want the assistant to {rest}"),
        r"^(?:please\s+)?(?:do not|don't|dont)\s+(?:ever\s+)?(?P<rest>.+)",
    ),
    *_rules(
        _INSTRUCTION,
        _imperative("the user wants the assistant to {rest}"),
        rf"^(?:please\s+)?(?:to\s+)?(?P<rest>{_IMPERATIVE_VERBS}.+)",
        r"^to\s+(?P<rest>[a-z][\w-]*\s.+)",
        marker=True,
    ),
    # "Let's use a dict" is tactics; "let's use Postgres for X" names something: a decision.
    *_rules(
        _TEAM_DECISION,
        _template("the team decided to {verb} {rest}"),
        rf"^let's\s+(?P<verb>{_SWITCH})\s+(?P<rest>.+)",
        specific=True,
    ),
    *_rules(
        _TEAM_DECISION,
        _whole,
        _WE + r"(?:'ve| have| has)?(?:\s+(?:finally|just|all|both|already|also|officially))*\s+"
        r"(?:decided|agreed|settled|concluded|chose|picked|selected|went with|opted|voted)\b\s*(?P<rest>.+)",
        _WE + r"(?:'ll| will| are going to|'re going to| is going to)(?:\s+(?:just|also|definitely|now))?\s+"
        rf"(?:{_SWITCH}|deprecate|drop|replace)\b\s*(?P<rest>.+)",
        r"^(?:the|our)\s+decision\s+(?:is|was)\s+(?P<rest>.+)",
    ),
    *_rules(_HEDGED_DECISION, _whole, r"^we\s+should(?:\s+(?:always|definitely))?\s+use\s+(?P<rest>.+)"),
    *_rules(
        _HEDGED_DECISION,
        _template("{rest}"),
        r"^it(?:'s| is| was| has)\s+(?:been\s+)?decided\s+(?:that\s+)?(?P<rest>.+)",
    ),
    *_rules(_CLARIFICATION, _whole, r"^i\s+meant\s+(?P<rest>.+)"),
    *_rules(
        _OWN_DECISION,
        _whole,
        r"^i(?:'ve| have)?\s+(?:decided|chose|picked|settled on|went with|opted)\b\s*(?P<rest>.+)",
    ),
    *_rules(
        _LESSON,
        _whole,
        r"^(?:we|i)(?:'ve| have)?\s+(?:just\s+)?(?:learned|learnt|found out|realized|realised)\s+that\s+(?P<rest>.+)",
    ),
    *_rules(
        _CONVENTION,
        _whole,
        r"^(?:our|the team's)\s+(?:[\w-]+\s+){0,2}?(?:conventions?|standards?|rules?|polic(?:y|ies)|style guide|"
        r"practices?|workflow|process)\s+(?:is|are|says|requires)\b\s*(?P<rest>.+)",
        r"^the\s+(?:[\w-]+\s+)?conventions?\s+(?:is|are)\b\s*(?P<rest>.+)",
        _WE + rf"{_HABIT}\s+(?P<rest>.+)",
        _WE + r"\s+(?:use|uses|follow|follows|enforce|enforces|require|requires|name|names|keep|keeps|put|puts|"
        r"store|stores|write|writes|run|runs|deploy|deploys|ship|ships|avoid|avoids|squash|squashes|rebase|rebases|"
        r"(?:don't|do not|doesn't|does not)\s+(?:use|allow|commit|merge|push|write|mock|deploy))\b\s*(?P<rest>.+)",
    ),
)


def _marker(pattern: str, **labels: Any) -> tuple[re.Pattern[str], _Reading]:
    return re.compile(pattern, _I), _Reading(durable=True, **labels)


_CORRECTION = _marker(
    r"^(?:actually|correction|to be clear|not quite|that's (?:wrong|incorrect|not (?:right|correct|true))|"
    r"you're wrong|(?:sorry,?\s+)?i was wrong(?:\s+(?:earlier|before))?|my mistake)\b[\s,:;.!-]*|"
    r"^(?:no|nope)\s*[,:;.!-]+\s*",
    category="corrections",
    importance=0.7,
    reason="The user corrected the assistant.",
)
_MARKERS: tuple[tuple[re.Pattern[str], _Reading], ...] = (
    _CORRECTION,
    _marker(
        r"^(?:please\s+)?(?:remember|don't forget|do not forget|never forget|make a note|keep in mind|bear in mind|"
        r"for future reference)(?:\s+(?:that|this))?\b\s*[:,-]?\s*",
        importance=0.8,
        confidence=0.9,
        explicit=True,
        reason="The user asked for this to be remembered.",
    ),
    _marker(
        r"^(?:(?:please\s+)?note(?:\s+that\b|\s*:)|(?:it's |it is |this is )?(?:very |really |super )?important"
        r"(?:\s+to\s+(?:note|know|remember))?(?:\s*[:,-]|\s+that\b|(?=\s+to\s)))\s*",
        importance=0.7,
        explicit=True,
        reason="The user flagged this as important.",
    ),
    _marker(
        r"^(?:the |a |one |my |our )?key\s+(?:insight|takeaway|learning|point)s?(?:\s+here)?\s*(?:is|was|:)\s*"
        r"(?:that\s+)?",
        kind="note",
        category="patterns",
        confidence=0.6,
        explicit=True,
        reason="The user stated a key insight.",
    ),
    _marker(
        r"^(?:(?:the|our|my)\s+conclusion\s+(?:is|was)\s*:?\s*(?:that\s+)?|in conclusion,?\s*|to conclude,?\s*)",
        kind="decision",
        category="architectural-decisions",
        confidence=0.6,
        explicit=True,
        reason="The user stated a conclusion.",
    ),
    _marker(
        r"^(?:from now on|going forward|moving forward|in (?:the )?future|by default)\b[,\s]*",
        importance=0.7,
        reason="The user gave a standing instruction.",
    ),
)
_PROJECT_CONTEXT = re.compile(
    r"^(?P<prefix>(?:in|for|on|across|within)\s+(?:this|our|the)\s+(?:repo|repository|project|codebase|monorepo|"
    r"team|service|app|company|org)s?)\s*,?\s+(?=\S)",
    _I,
)
_CONDITION_CONTEXT = re.compile(r"^(?P<prefix>(?:when|whenever)\s+[^,]{3,60}),\s+(?=\S)", _I)


def extract_from_window(messages: Sequence[Mapping[str, str]]) -> list[ProposedMemory]:
    """Memories stated by the user in a cleaned window (see ``capture.window.clean_window``)."""
    proposals: list[ProposedMemory] = []
    seen: set[str] = set()
    for message in messages:
        if message.get("role") != "user":
            continue
        for proposal in _from_message(message.get("content", "")):
            key = re.sub(r"\W+", " ", proposal.content.casefold()).strip()
            if key not in seen:
                seen.add(key)
                proposals.append(proposal)
    return proposals


def _from_message(text: str) -> Iterator[ProposedMemory]:
    correcting = False
    for sentence in split_sentences(text):
        clean = strip_fillers(sentence)
        only_marker = _CORRECTION[0].match(clean)
        if only_marker and only_marker.end() == len(clean):
            correcting = True  # "That's wrong." -- the next sentence says what is right
            continue
        if _skip_sentence(clean):
            correcting = False
            continue
        readings, body = _take_markers(clean)
        if correcting:
            readings.insert(0, _CORRECTION[1])
            correcting = False
        for clause in _CLAUSE_SPLIT.split(body):
            clause_readings, clause_body = _take_markers(strip_fillers(clause))
            proposal = _propose(clause_body, readings + clause_readings, sentence)
            if proposal is not None:
                yield proposal


def _skip_sentence(sentence: str) -> bool:
    # Whatever else a sentence holding a secret says is usually about that secret.
    return not sentence or is_question(sentence) or is_hedged(sentence) or bool(find_secrets(sentence))


def _take_markers(text: str) -> tuple[list[_Reading], str]:
    """Strip leading markers off ``text``; return how they ask it to be read, and the rest."""
    readings: list[_Reading] = []
    while True:
        for pattern, reading in _MARKERS:
            match = pattern.match(text)
            if match and match.end() > 0 and match.end() < len(text):
                readings.append(reading)
                text = strip_fillers(text[match.end() :])
                break
        else:
            context = _PROJECT_CONTEXT.match(text) or _CONDITION_CONTEXT.match(text)
            if context is None:
                return readings, text
            scope = "project" if context.re is _PROJECT_CONTEXT else ""
            # "In this repo, ..." is as explicit as "remember that"; "when ..." only narrows.
            project = context.re is _PROJECT_CONTEXT
            readings.append(
                _Reading(scope=scope, durable=True, explicit=project, prefix=third_person(context["prefix"]))
            )
            text = lower_first(text[context.end() :])


def _propose(body: str, readings: list[_Reading], evidence: str) -> ProposedMemory | None:
    words = len(body.split())
    if not _MIN_WORDS <= words <= _MAX_WORDS or is_transient(body.rstrip(" .!")) or find_secrets(body):
        return None
    durable = any(r.durable for r in readings)
    for rule in _RULES:
        match = rule.pattern.match(body.rstrip(" .!"))
        if match is None or (rule.needs_marker and not durable):
            continue
        rest = _PARTICLE.sub("", (match.groupdict().get("rest") or "x").strip())
        if is_vague(rest) or (rule.needs_specific and not is_specific(rest)):
            return None
        content, base = rule.build(match), rule.reading
        break
    else:
        explicit = any(r.explicit for r in readings)
        if not readings or is_vague(body) or not (explicit or reads_as_statement(body)):
            return None
        content, base = third_person(body), _Reading(confidence=0.6)
    return None if content is None else _assemble(content, base, readings, evidence)


def _assemble(content: str, base: _Reading, readings: list[_Reading], evidence: str) -> ProposedMemory | None:
    prefixes = [r.prefix for r in readings if r.prefix]
    text = finish_sentence(", ".join([*prefixes, content]))
    if not _MIN_CHARS <= len(text) <= _MAX_CHARS:
        return None
    overrides = [base, *readings]
    kind, category, scope = _infer(text)
    kind = next((r.kind for r in reversed(overrides) if r.kind), kind)
    scope = next((r.scope for r in reversed(overrides) if r.scope), scope)
    category = next((r.category for r in reversed(overrides) if r.category), category)
    if category == "?":
        category = "coding-preferences" if is_technical(text) else "user-facts"
    elif category == "?decision":
        category = "architectural-decisions" if is_technical(text) else "user-facts"
    if scope == "project" and category == "user-facts":
        category = "project-conventions"
    return ProposedMemory(
        content=text,
        kind=kind,
        category=category,
        scope=scope,
        importance=max(r.importance for r in overrides),
        confidence=max(r.confidence for r in overrides),
        reason=next((r.reason for r in reversed(overrides) if r.reason), "The user stated it."),
        evidence=clip(evidence, 200),
    )


def _infer(content: str) -> tuple[str, str, str]:
    """Labels for a statement no rule recognised, read from its rewritten content."""
    scope = "project" if _TEAM.search(content) else "user"
    if _DECISION_WORDS.search(content):
        return "decision", "architectural-decisions", scope
    if _PREFERENCE_WORDS.search(content):
        return "preference", "?", scope
    if scope == "user" and re.search(r"\bthe user\b", content, _I):
        return "fact", "user-facts", scope
    return "fact", "project-conventions", scope

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

A clause that changes the user's mind ("I switched from black to ruff", "I no longer eat
meat", "actually, we deploy on Wednesdays now") is read by ``capture.changes``; the memory it
replaces, found among the user's existing memories, becomes its ``supersedes``. A clause no
rule knows that follows a kept one in the same sentence ("we decided X; releases go out
Tuesday mornings") is kept with the same labels when it reads as a specific statement.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from capture.changes import Change, Known, Matcher, message_change, named_old, read_change
from capture.proposals import ProposedMemory
from capture.text import (
    clip,
    finish_sentence,
    has_schedule,
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
from common.redaction import REDACTED, find_secrets
from conversations.dates import resolve as resolve_dates
from conversations.dates import said_on

_I = re.IGNORECASE
_ADV = r"(?:\s+(?:really|much|strongly|generally|usually|definitely|personally|also|still|always|mostly|totally))*"
_HABIT = r"(?:\s+(?:always|never|usually|generally|typically|normally|mostly))+"
_PARTICLE = re.compile(r"^(?:(?:to|on|that|with|for|about|using)\s+)+", _I)
_CLAUSE_SPLIT = re.compile(
    r"\s*(?:;|,\s+so\s+|(?:,?\s+(?:and|but|plus)\s+(?:also\s+)?|,\s+)"
    r"(?=(?:i|i'm|i've|i'd|i'll|we|we're|we've|we'll|my|our|the team|please|let's)\b)"
    r"|,\s+(?=(?:use|always|don't|do not|it's|it is|it was|she|he|she's|he's|they)\b)"
    # ", and releases are tagged vX": a new subject with its own verb.
    r"|,\s+(?:and|but)\s+(?=(?:the\s+|our\s+)?[\w.-]+(?:\s+[\w.-]+)?\s+(?:is|are|was|were|will|has|have|gets?)\b)"
    r"|,\s+(?=(?-i:[A-Z])[\w.-]*\s+(?:is|are|was|were|will)\b))",
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
    specialization focus framework database setup workflow level experience birthday age anniversary hours
    schedule diet commute"""
)
_PROFILE_ADJECTIVES = ("preferred", "favorite", "favourite", "main", "primary", "usual", "default", "native")
_NOT_IMPERATIVE = word_set(
    "mind heard seen thought knew again ever worry bother know think care be get apologize "
    "apologise panic forget hesitate"
)
_PETS = (
    r"(?:dogs?|cats?|pets?|pupp(?:y|ies)|kittens?|greyhounds?|labradors?|retrievers?|poodles?|terriers?|beagles?|"
    r"spaniels?|collies?|dachshunds?|huskies|husky|corgis?|hamsters?|rabbits?|bunn(?:y|ies)|parrots?|budgies?|"
    r"tortoises?|turtles?|guinea pigs?|horses?|ponies|pony)"
)
_FAMILY = (
    r"(?:kids?|children|child|sons?|daughters?|twins|wife|husband|partner|spouse|girlfriend|boyfriend|"
    r"fianc[ée]e?|mom|mum|mother|dad|father|parents|sisters?|brothers?|siblings|grandkids|grandchildren|"
    r"grandma|grandpa|grandmother|grandfather|aunt|uncle|cousins?|niece|nephew|in-laws|"
    rf"bab(?:y|ies)|newborn|toddler|{_PETS})"
)
# What a household does together: "we" and "our" around these are the user's family, not the team.
_HOUSEHOLD = re.compile(
    rf"\b(?:{_FAMILY}|house|home|flat|apartment|condo|garden|backyard|kitchen|mortgage|rent|landlord|car|"
    r"wedding|honeymoon|anniversary|vacation|holiday|neighbou?rs?|adopted|pregnant|born|married|engaged|"
    r"dinner|groceries|weekend|moved)\b",
    _I,
)
_HEALTH = (
    r"(?:diabetes|asthma|adhd|autism|dyslexia|coeliac|celiac|crohn's|ibs|arthritis|epilepsy|migraines?|"
    r"hypertension|high blood pressure|anxiety|depression|allerg(?:y|ies)|intolerances?|insomnia|tinnitus|"
    r"eczema|(?:a\s+)?(?:heart|thyroid|kidney|back|knee)\s+(?:condition|problem|injury)|disability)"
)
_STATE = (
    r"(?:vegan|vegetarian|pescatarian|pescetarian|gluten[- ]free|dairy[- ]free|lactose[- ]free|diabetic|"
    r"pregnant|left[- ]handed|right[- ]handed|colou?r[- ]?blind|deaf|hard of hearing|dyslexic|autistic|"
    r"epileptic|asthmatic|married|divorced|engaged|widowed|retired|sober|teetotal|kosher|halal|"
    r"(?:lactose|gluten|fructose|histamine|dairy)[- ]intolerant|allergic\s+to)"
)
# Verbs after "we" that narrate or wish rather than state how the team works.
_NOT_CONVENTION_VERBS = word_set(
    """need want have had could should might may can will would did were was got went tried saw think thought
    know hope like love hate talked met discussed just still really are is am wonder guess feel felt said told
    asked looked found started finished fixed broke noticed learned learnt made"""
)
_NOT_SCHEDULE_VERBS = word_set("need want think hope guess wish feel know mean love like hate am was wonder")
_PROJECT_NOUNS = re.compile(
    r"\b(?:staging|production|prod|release|releases|deploys?|deployments?|builds?|ci|sprint|standups?|"
    r"code freeze|launch|repo|server|servers|cluster|pipeline|database|backend|frontend|api|service|services)\b",
    _I,
)
# "My AWS key is AKIA…": a credential's label with a value, however cut or masked.
_SECRETISH = re.compile(
    r"\b(?:passwords?|passphrase|passcode|pin|api[ _-]?keys?|(?<!the )keys?(?!\s+(?:insight|takeaway|point|"
    r"learning|decision|question|idea|part|thing|lesson|difference|feature|benefit|factor|step))|tokens?|"
    r"secrets?|credentials?|connection string)\b(?:\s+\w+){0,2}?\s*(?:is|are|was|:|=)\s*"
    r"(?=\S*[\d…_/+=*-]|(?-i:[A-Z0-9]{4,}))",
    _I,
)
_INTRO = re.compile(
    r"^(?:after\s+[^,]{3,40}?|in the end|eventually|finally|at last|yesterday|today|last (?:week|month|year|sprint)|"
    r"this (?:morning|week)|these days|nowadays|now)\s*,?\s+(?=(?:we|i|i'm|i've|the team|our|my)\b)",
    _I,
)
_DATED_INTRO = re.compile(r"^(?:yesterday|today|last (?:week|month|year)|this (?:morning|week))\b", _I)
# What a diet or a condition rules out, said plainly so "is there anything I can't eat?" finds it.
_DIET_GLOSSES = tuple(
    (re.compile(pattern, _I), gloss)
    for pattern, gloss in (
        (r"^(?!.*\bgluten\b).*\b(?:celiac|coeliac)\b", "so the user can't eat gluten"),
        (r"^(?!.*\bdairy\b).*\blactose[- ]intoleran(?:t|ce)\b", "so the user can't eat most dairy"),
    )
)
# Said at the end of a clause, these mark a change of mind and are not part of the statement.
_CHANGE_TAIL = re.compile(
    r"(?:,?\s+(?:now|these days|nowadays|from now on|going forward|from here on|instead|any\s?more|again))+$", _I
)
_CHANGE_HEAD = re.compile(r"^(?:these days|nowadays|now)\b", _I)
# "We now deploy on Fridays", "I'm now on Linux": a change said mid-clause (kept in the text).
_CHANGE_MID = re.compile(r"^(?:i|we|the team)(?:'m| am|'re| are|'ve| have)?\s+now\b", _I)
_NEVER_AGAIN = re.compile(r"\bto\s+(?P<verb>[a-z]+)\s+(?P<rest>.+?)\s+never again\b", _I)
_MIN_CHARS, _MAX_CHARS, _MIN_WORDS, _MAX_WORDS = 12, 300, 2, 45
# The content of a change that is no statement on its own ("it's X, not Y"), until it is resolved.
_UNSTATED = "-"


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
    change: bool = False  # the marker says the user changed their mind ("actually", "from now on")


_Builder = Callable[[re.Match[str]], str | None]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    build: _Builder
    reading: _Reading
    needs_marker: bool = False
    needs_specific: bool = False


Rules = tuple[_Rule, ...]


@dataclass
class _Found:
    """A proposal in the making, with the change of mind it states (if any)."""

    proposal: ProposedMemory
    change: Change | None = None
    signalled: bool = False
    reading: _Reading | None = None


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
    known = words[-1] in _PROFILE_NOUNS or words[0] in _PROFILE_ADJECTIVES
    if not (known or re.fullmatch(_FAMILY, words[-1]) or is_specific(match["rest"])):
        return None
    return third_person(match.string)


def _imperative(text: str) -> Callable[[re.Match[str]], str | None]:
    def build(match: re.Match[str]) -> str | None:
        first = match["rest"].split()[0].lower().strip(",.;:!")
        return None if first in _NOT_IMPERATIVE else _template(text)(match)

    return build


def _household(match: re.Match[str]) -> str:
    """A statement about the user's family, where "we" and "us" are the household, not the team."""
    text = re.sub(r"\b(?:we|us)\b", "the user's family", match.string, flags=_I)
    return third_person(re.sub(r"\bour\b", "the user's", text, flags=_I))


def _household_event(match: re.Match[str]) -> str | None:
    """ "we adopted a greyhound", "our son Arjun was born in may": the household's life, not the
    team's work (nothing of a project is named)."""
    text = match.string
    if not _HOUSEHOLD.search(text) or _PROJECT_NOUNS.search(text) or is_technical(text):
        return None
    if len(text.split()) < 3:
        return None
    return _household(match)


def _life_event(match: re.Match[str]) -> str | None:
    """ "I started a new job at Acme", "I ran my first marathon": the user's life, not a work step
    ("I started refactoring the parser" names code and is left out)."""
    text = match.string
    if is_technical(text) or _PROJECT_NOUNS.search(text) or len(text.split()) < 4:
        return None
    return third_person(text)


def _place(match: re.Match[str]) -> str:
    return f"the user lives in {match['place']}"


def _team_statement(match: re.Match[str]) -> str | None:
    verb = match["verb"].lower()
    if (
        verb in _NOT_CONVENTION_VERBS
        or verb.endswith("ed")
        or not (is_specific(match["rest"]) or is_technical(match.string))
    ):
        return None
    return third_person(match.string)


def _statement(match: re.Match[str]) -> str | None:
    """A bare statement ("The staging environment gets wiped every Sunday night") about the project."""
    text = match.string
    if not (reads_as_statement(text) and (has_schedule(text) or is_specific(text)) and _PROJECT_NOUNS.search(text)):
        return None
    return third_person(text)


def _our(match: re.Match[str]) -> str | None:
    text = match.string
    return third_person(text) if reads_as_statement(text) and (is_specific(text) or is_technical(text)) else None


def _scheduled(match: re.Match[str]) -> str | None:
    verb = match["verb"].lower()
    if verb in _NOT_SCHEDULE_VERBS or not has_schedule(match.string):
        return None
    return third_person(match.string)


def _reading(kind: str, category: str, scope: str, importance: float, confidence: float, reason: str) -> _Reading:
    return _Reading(kind, category, scope, importance, confidence, reason)


_NAME = _reading("fact", "user-facts", "user", 0.6, 0.9, "The user said what to call them.")
_EVENT = _reading("fact", "user-facts", "user", 0.5, 0.75, "The user told of something that happened in their life.")
_USER_FACT = _reading("fact", "user-facts", "user", 0.5, 0.8, "The user stated a fact about themselves.")
_PERSONAL = _reading(
    "fact", "user-facts", "user", 0.6, 0.85, "The user stated a fact about their health, family or life."
)
_SCHEDULE = _reading("fact", "user-facts", "user", 0.5, 0.8, "The user stated a regular commitment or a deadline.")
_PREFERENCE = _reading("preference", "?", "user", 0.6, 0.8, "The user stated a preference.")
_TOOL = _reading("preference", "?", "user", 0.5, 0.8, "The user said what they use.")
_INSTRUCTION = _reading("preference", "?", "", 0.7, 0.8, "The user gave a standing instruction.")
_TEAM_DECISION = _reading("decision", "architectural-decisions", "project", 0.7, 0.8, "The team made a decision.")
_HEDGED_DECISION = dataclasses.replace(_TEAM_DECISION, scope="", confidence=0.6)
_OWN_DECISION = _reading("decision", "?decision", "user", 0.6, 0.75, "The user made a decision.")
_CONVENTION = _reading("fact", "project-conventions", "project", 0.7, 0.8, "The user described a team convention.")
_CLARIFICATION = _reading("fact", "corrections", "user", 0.4, 0.5, "The user clarified what they meant.")
_LESSON = _reading("note", "lesson", "", 0.6, 0.7, "The user shared a lesson learned.")
_CHANGED = _reading("", "", "", 0.7, 0.8, "The user changed their mind.")

_WE = r"^(?:we|the team)"
_SWITCH = r"(?:go with|use|stick with|stick to|standardi[sz]e on|adopt|switch to|move to|migrate to|keep using)"
_IMPERATIVE_VERBS = (
    r"(?:use|prefer|avoid|write|put|keep|name|add|run|format|default to|stick to|stick with|call|place|prefix|"
    r"include|document|test|check|ask|answer|reply|respond|explain)\b"
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
    *_rules(
        _PERSONAL,
        _whole,
        rf"^i(?:'m| am)(?:\s+(?:also|very|severely|mildly|slightly|quite|extremely|highly|seriously|currently))*\s+"
        rf"(?P<rest>{_STATE}.*)",
        rf"^i(?:'ve| have)(?:\s+got)?(?:\s+also)?\s+(?!a\s+(?:question|problem|bug|meeting|call|idea|feeling)\b)"
        rf"(?P<rest>(?:.*\b{_HEALTH}\b.*|(?:a|an|one|two|three|four|five|\d+)\s+(?:[\w-]+\s+){{0,2}}?{_FAMILY}\b.*|"
        rf"twins\b.*))",
        r"^i(?:'m| am)\s+(?:currently\s+|also\s+)?(?:training for|learning|studying|preparing for|saving (?:up )?for|"
        r"recovering from|expecting)\s+(?P<rest>.+)",
        r"^i\s+take\s+(?P<rest>.*\b(?:medication|meds|medicine|pills?|insulin|vitamins?|supplements?|inhaler)\b.*)",
        r"^i(?:\s+(?:never|don't|do not|rarely|only|can't|cannot))\s+(?:eat|drink|smoke)\b\s*(?P<rest>.+)",
    ),
    *_rules(_PERSONAL, _household, rf"^my\s+(?P<rest>{_FAMILY}(?:\s+(?-i:[A-Z])[\w'-]+)?\s+(?!is\b|are\b).+)"),
    *_rules(
        _PERSONAL,
        _template("the user's family has {rest}"),
        rf"^we\s+(?:have|'ve got|have got)\s+(?P<rest>(?:(?:[\w-]+\s+){{0,3}}?{_FAMILY}|twins)\b.*)",
    ),
    *_rules(_PERSONAL, _template("the user lives {rest}"), r"^we\s+live\s+(?P<rest>(?:in|near|outside|by)\b.+)"),
    *_rules(_PERSONAL, _household_event, r"^(?:we|our)\b(?P<rest>.+)"),
    *_rules(
        _EVENT,
        _life_event,
        r"^i(?:'ve| have)?(?:\s+(?:just|finally|recently|also|officially|actually))*\s+"
        r"(?:started|quit|joined|left|got|bought|sold|adopted|ran|finished|graduated|passed|married|"
        r"booked|visited|lost|won|became|retired|began|completed|opened|signed up|enrolled|gave birth|"
        r"was (?:promoted|diagnosed|hired|laid off|born)|got (?:promoted|married|engaged|divorced|diagnosed))\b"
        r"\s*(?P<rest>.+)",
    ),
    *_rules(
        _USER_FACT,
        _place,
        r"^i(?:'ve| have)?(?:\s+(?:just|recently))*\s+(?:moved|relocated)\s+(?:back\s+)?to\s+"
        r"(?P<place>(?-i:[A-Z])[\w'.-]*(?:\s+(?-i:[A-Z])[\w'.-]*)*)(?:\s+(?:last|this|in|a|two|few)\b.*)?$",
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
    *_rules(_PREFERENCE, _whole, r"^i\s+(?:want|need)\s+(?!to\b|you\b)(?P<rest>.+)", marker=True),
    *_rules(
        _USER_FACT,
        _whole,
        r"^i(?:'m| am)\s+an?\s+(?!(?:bit|little|lot|tad|moment|sec|second|minute)\b)(?P<rest>.+)",
        r"^i(?:\s+(?:currently|now|mostly|usually|also))?\s+work\s+(?P<rest>(?:at|for|as|in|on|from|remotely|"
        r"nights?|night shifts|part[- ]time|full[- ]time|weekends|with)\b.+)",
        r"^i(?:\s+(?:currently|now|still))?\s+live\s+(?P<rest>(?:in|at|on|near|with|outside|by)\b.+)",
        r"^i(?:'m| am)\s+(?:based in|located in|from)\s+(?P<rest>.+)",
    ),
    *_rules(
        _USER_FACT,
        _whole,
        r"^i(?:'ve| have)\s+(?:been\s+(?:using|writing|coding|programming|working)\b|(?:over\s+|about\s+)?\d+\+?\s+"
        r"years?\b)\s*(?P<rest>.+)",
        r"^i(?:'m| am)\s+(?:on|using|running)\s+(?P<rest>.+)",
        specific=True,
    ),
    *_rules(
        _TOOL,
        _whole,
        r"^i(?:\s+(?:mostly|mainly|also|only|now))?\s+(?:use|code in|write|program in|develop (?:in|on|with))\s+"
        r"(?P<rest>.+)",
        specific=True,
    ),
    *_rules(
        _SCHEDULE,
        _whole,
        r"^i\s+(?:need|have|must|'ve got|have got)\s+to\s+(?P<rest>.+\b(?:by|before|until)\b.+)",
        specific=True,
    ),
    *_rules(
        _SCHEDULE,
        _scheduled,
        r"^i(?:\s+(?:usually|always|normally|typically|also|only|mostly))*\s+(?P<verb>[a-z]+)\b\s*(?P<rest>.+)",
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
        rf"(?:{_SWITCH}|deprecate|drop|replace|sunset|retire|freeze|remove)\b\s*(?P<rest>.+)",
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
    *_rules(
        _CONVENTION,
        _team_statement,
        _WE + r"(?:\s+(?:usually|always|generally|typically|normally|mostly|also|only|all))*\s+(?P<verb>[a-z][\w-]*)\b"
        r"\s*(?P<rest>.+)",
    ),
    *_rules(_CONVENTION, _our, r"^(?:our|the team's)\s+(?P<rest>.+)", r"^(?P<rest>\S+\s+\S+.*\bour\b.+)"),
    *_rules(_CONVENTION, _statement, r"^the\s+(?P<rest>.+)"),
)


def _marker(pattern: str, **labels: Any) -> tuple[re.Pattern[str], _Reading]:
    return re.compile(pattern, _I), _Reading(durable=True, **labels)


_CORRECTION = _marker(
    r"^(?:actually|correction|to be clear|not quite|scratch that|that's (?:wrong|incorrect|not (?:right|correct|true))|"
    r"you're wrong|(?:sorry,?\s+)?i was wrong(?:\s+(?:earlier|before))?|my mistake|update)\b[\s,:;.!-]*|"
    r"^(?:no|nope)\s*[,:;.!-]+\s*",
    category="corrections",
    importance=0.7,
    reason="The user corrected the assistant.",
    change=True,
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
        r"^(?:from now on|going forward|moving forward|from here on|in (?:the )?future|by default)\b[,\s]*",
        importance=0.7,
        reason="The user gave a standing instruction.",
        change=True,
    ),
)
_PROJECT_CONTEXT = re.compile(
    r"^(?P<prefix>(?:in|for|on|across|within)\s+(?:this|our|the)\s+(?:repo|repository|project|codebase|monorepo|"
    r"team|service|app|company|org)s?)\s*,?\s+(?=\S)",
    _I,
)
_CONDITION_CONTEXT = re.compile(r"^(?P<prefix>(?:when|whenever)\s+[^,]{3,60}),\s+(?=\S)", _I)
_FOLLOW_ON = re.compile(r"^(?:i|i'm|i've|she|he|she's|he's|we|we're|they|they're)\b", _I)


def extract_from_window(
    messages: Sequence[Mapping[str, str]],
    *,
    existing: Sequence[Known] = (),
    nearest: Callable[[str], str | None] | None = None,
    today: date | None = None,
) -> list[ProposedMemory]:
    """Memories stated by the user in a cleaned window (see ``conversations.window.clean_window``).

    ``existing`` are the user's live memories: a change of mind supersedes the one it replaces
    (see ``capture.changes``); ``nearest`` optionally finds one by meaning. Relative dates are
    resolved against each message's ``timestamp``, else ``today`` (the capture's day).
    """
    matcher = Matcher(existing, nearest)
    proposals: list[ProposedMemory] = []
    seen: set[str] = set()
    for message in messages:
        if message.get("role") != "user":
            continue
        said = said_on(message.get("timestamp"), today or date.today())
        for found in _from_message(message.get("content", "")):
            proposal = _resolve(found, matcher)
            if proposal is None:
                continue
            proposal = glossed(dated(proposal, said))
            key = re.sub(r"\W+", " ", proposal.content.casefold()).strip()
            if key not in seen:
                seen.add(key)
                proposals.append(proposal)
        for proposal in _names(message.get("content", ""), proposals):
            proposals.append(proposal)
        replaced = _replaced(message.get("content", ""), matcher)
        if replaced is not None and replaced.content not in {p.content for p in proposals}:
            proposals.append(replaced)
    return proposals


def glossed(proposal: ProposedMemory) -> ProposedMemory:
    """A diet or condition with what it rules out added ("...celiac disease; so the user can't eat gluten")."""
    if proposal.category != "user-facts" or proposal.kind != "fact":
        return proposal
    for pattern, gloss in _DIET_GLOSSES:
        if pattern.search(proposal.content) and gloss not in proposal.content:
            content = finish_sentence(f"{proposal.content.rstrip('.')}, {gloss}")
            return dataclasses.replace(proposal, content=content) if len(content) <= _MAX_CHARS else proposal
    return proposal


_NAMED = re.compile(
    r"\b(?:(?:her|his|its)\s+name(?:'s|\s+is)|(?:she|he|it)(?:'s|\s+is)\s+(?:called|named))\s+"
    r"(?P<name>[a-z][\w'-]+)\b",
    _I,
)
_RELATION = re.compile(rf"\b(?:{_FAMILY}|manager|boss|supervisor|colleague|coworker|friend|mate|neighbou?r)\b", _I)


def _names(text: str, found: Sequence[ProposedMemory]) -> list[ProposedMemory]:
    """ "we adopted a greyhound! her name is pixel": the name of the one just spoken of, as its own memory."""
    named = []
    for match in _NAMED.finditer(text):
        before = list(_RELATION.finditer(text[: match.start()]))
        name = match["name"]
        if not before or any(re.search(rf"\b{re.escape(name)}\b", p.content, _I) for p in found):
            continue
        who = before[-1].group().lower()
        content = f"The user's {who} is called {name[0].upper()}{name[1:]}."
        named.append(
            ProposedMemory(
                content=content,
                kind="fact",
                category="user-facts",
                importance=0.6,
                confidence=0.7,
                reason="The user named someone close to them.",
                evidence=clip(text, 200),
            )
        )
    return named


def _replaced(text: str, matcher: Matcher) -> ProposedMemory | None:
    """A change no clause stated on its own ("dropped X ... using Y now"): the memory naming X,
    rewritten with Y, when exactly one does."""
    change = message_change(text)
    if change is None:
        return None
    placeholder = ProposedMemory(
        content=_UNSTATED,
        kind="fact",
        category="user-facts",
        reason="The user said what replaced what.",
        evidence=clip(text, 200),
    )
    return _resolve(_Found(placeholder, change=change, signalled=True), matcher)


def dated(proposal: ProposedMemory, said: date) -> ProposedMemory:
    """The proposal with its relative dates resolved against the day they were said."""
    resolved = resolve_dates(proposal.content, said)
    if not resolved.event_date:
        return proposal
    return dataclasses.replace(proposal, content=finish_sentence(resolved.text), event_date=resolved.event_date)


def _resolve(found: _Found, matcher: Matcher) -> ProposedMemory | None:
    """The proposal, as the successor of the memory its change of mind replaces when one is found."""
    proposal, change = found.proposal, found.change
    if change is None and not found.signalled:
        # A statement filling a one-value slot ("I live in Munich") still replaces the old value.
        successor = matcher.find(proposal.content, None, signalled=False)
    else:
        successor = matcher.find(proposal.content, change, signalled=found.signalled)
    if successor is None:
        # An elliptical change ("it's X, not Y") means nothing without the memory it corrects.
        return None if proposal.content == _UNSTATED else proposal
    old = successor.memory
    content, kind = proposal.content, proposal.kind
    if successor.content:
        content, kind = successor.content, old.kind or proposal.kind
    if content == _UNSTATED:
        return None
    return dataclasses.replace(
        proposal,
        content=finish_sentence(content),
        kind=kind,
        category=old.category or proposal.category,
        scope=old.scope or proposal.scope,
        supersedes=old.id,
        reason=f"{proposal.reason} It replaces an earlier memory.".strip(),
    )


def _from_message(text: str) -> Iterator[_Found]:
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
        yield from _from_sentence(body, readings, sentence)


def _from_sentence(body: str, readings: list[_Reading], sentence: str) -> Iterator[_Found]:
    """The memories of one sentence: each clause on its own, then follow-on clauses."""
    previous: _Found | None = None
    pending: list[_Found] = []
    for clause in _CLAUSE_SPLIT.split(body):
        clause_readings, clause_body = _take_markers(strip_fillers(clause))
        intro = _INTRO.match(clause_body)
        clause_body = _INTRO.sub("", clause_body)
        if intro and _DATED_INTRO.match(intro.group()):
            # "Yesterday we adopted a dog": the date moves to the end, where it stays in the memory.
            clause_body = f"{clause_body.rstrip(' .!')} {intro.group().strip(' ,')}"
        all_readings = readings + clause_readings
        if previous is not None and _completes(previous, clause_body):
            continue
        found = _propose(clause_body, all_readings, sentence)
        if found is None and previous is not None:
            found = _follow_on(clause_body, previous, sentence)
        if found is not None:
            pending.append(found)
            previous = found
    yield from pending


def _completes(previous: _Found, clause: str) -> bool:
    """Adds ``clause`` to ``previous`` when it says what replaced what ``previous`` ended:
    "I no longer drive to work, I cycle" is one memory."""
    body = _CHANGE_TAIL.sub("", clause.rstrip(" .!"))
    if previous.change is None or not previous.change.ending or not _FOLLOW_ON.match(body):
        return False
    if len(body.split()) > 10 or is_question(body) or is_vague(body) or _holds_secret(body):
        return False
    content = finish_sentence(previous.proposal.content).rstrip(".") + "; " + third_person(body)
    previous.proposal = dataclasses.replace(previous.proposal, content=finish_sentence(content))
    previous.change = dataclasses.replace(previous.change, new=body)
    return True


def _follow_on(clause: str, previous: _Found, evidence: str) -> _Found | None:
    """A clause no rule knows after a team rule or decision: "we decided X; releases go out Tuesdays"."""
    body = _CHANGE_TAIL.sub("", clause.rstrip(" .!"))
    reading = previous.reading
    if reading is None or not (reading.scope == "project" or reading.kind == "decision"):
        return None
    if _FOLLOW_ON.match(body) or is_vague(body) or is_transient(body):
        return None
    if len(body.split()) < 3 or not reads_as_statement(body) or not (is_specific(body) or is_technical(body)):
        return None
    assembled = _assemble(third_person(body), reading, [], evidence)
    return None if assembled is None else _Found(assembled, reading=reading)


def _holds_secret(text: str) -> bool:
    """A secret, or the marker of one redacted before the extractor saw the text (windows are
    stored redacted)."""
    return REDACTED in text or bool(find_secrets(text))


def _skip_sentence(sentence: str) -> bool:
    # Whatever else a sentence holding a secret says is usually about that secret.
    return (
        not sentence
        or is_question(sentence)
        or is_hedged(sentence)
        or _holds_secret(sentence)
        or bool(_SECRETISH.search(sentence))
    )


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


def _propose(body: str, readings: list[_Reading], evidence: str) -> _Found | None:
    words = len(body.split())
    if not _MIN_WORDS <= words <= _MAX_WORDS or _holds_secret(body):
        return None
    body = body.rstrip(" .!")
    signalled = any(r.change for r in readings) or bool(_CHANGE_HEAD.match(body) or _CHANGE_MID.match(body))
    changed = read_change(body)
    if changed is not None:
        statement, change = changed
        reading = _CHANGED
        if change.elliptical and statement:
            # "I switched to X" is a choice of the user's; "we moved X to Y", the team's decision.
            switch_kind = "preference" if statement.lower().startswith("the user ") else "decision"
            reading = dataclasses.replace(_CHANGED, kind=switch_kind)
        found = _assemble(statement or _UNSTATED, reading, readings, evidence, keep_category=True)
        if found is None:
            return None
        return _Found(found, change=change, signalled=True)
    if is_transient(body):
        return None
    body = _NEVER_AGAIN.sub(r"never to \g<verb> \g<rest> again", body)
    stripped = _CHANGE_HEAD.sub("", _CHANGE_TAIL.sub("", body) if not body.endswith(" again") else body).strip(" ,")
    signalled = signalled or stripped != body
    body = stripped
    if is_transient(body) or len(body.split()) < _MIN_WORDS:
        return None
    durable = any(r.durable for r in readings) or signalled
    for rule in _RULES:
        match = rule.pattern.match(body)
        if match is None or (rule.needs_marker and not durable):
            continue
        rest = _PARTICLE.sub("", (match.groupdict().get("rest") or "x").strip())
        if is_vague(rest) or (rule.needs_specific and not is_specific(rest)):
            return None
        content, base = rule.build(match), rule.reading
        if content is None:
            continue
        break
    else:
        explicit = any(r.explicit for r in readings)
        if not readings or is_vague(body) or not (explicit or reads_as_statement(body)):
            return None
        content, base = third_person(body), _Reading(confidence=0.6)
    proposal = _assemble(content, base, readings, evidence)
    if proposal is None:
        return None
    old = named_old(body)
    return _Found(
        proposal,
        change=Change(old=old) if old else None,
        signalled=signalled,
        reading=dataclasses.replace(base, prefix=""),
    )


def _assemble(
    content: str, base: _Reading, readings: list[_Reading], evidence: str, *, keep_category: bool = False
) -> ProposedMemory | None:
    prefixes = [r.prefix for r in readings if r.prefix]
    text = finish_sentence(", ".join([*prefixes, content]))
    if not _MIN_CHARS <= len(text) <= _MAX_CHARS and content != _UNSTATED:
        return None
    overrides = [base, *readings]
    kind, category, scope = _infer(text)
    kind = next((r.kind for r in reversed(overrides) if r.kind), kind)
    scope = next((r.scope for r in reversed(overrides) if r.scope), scope)
    # A correction marker labels facts; a preference stays a preference of its kind.
    markers = [r for r in readings if not (r.change and base.kind == "preference")]
    category = next((r.category for r in reversed([base, *markers]) if r.category), category)
    if category == "?":
        category = "coding-preferences" if is_technical(text) else "user-facts"
    elif category == "?decision":
        category = "architectural-decisions" if is_technical(text) else "user-facts"
    if keep_category and category == "corrections":
        category = "coding-preferences" if is_technical(text) else "user-facts"
    if scope == "project" and is_personal(content):
        # Health, diet, family, home: the speaker's own, whatever team words surround it.
        text, scope, category = finish_sentence(content), "user", "user-facts"
    if scope == "project" and category == "user-facts":
        category = "project-conventions"
    return ProposedMemory(
        content=text if content != _UNSTATED else _UNSTATED,
        kind=kind,
        category=category,
        scope=scope,
        importance=max(r.importance for r in overrides),
        confidence=max(r.confidence for r in overrides),
        reason=next((r.reason for r in reversed(overrides) if r.reason), "The user stated it."),
        evidence=clip(evidence, 200),
    )


_PERSONAL_WORDS = re.compile(
    rf"\b(?:{_HEALTH}|{_STATE}|{_FAMILY}|allergic|allergy|diagnosed|doctor|pregnan(?:t|cy)|birthday|my\s+(?:wife|husband|"
    r"partner|home|address|phone|email))\b|\bthe user's\s+(?:family|home|address|phone|email|doctor|health|diet)\b",
    _I,
)


def is_personal(content: str) -> bool:
    """Whether a statement is about the speaker's person or household (health, diet, family, pets,
    contact, home): such a fact is never the project's, whichever extractor proposed it."""
    return bool(_PERSONAL_WORDS.search(content)) and not _DECISION_WORDS.search(content)


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

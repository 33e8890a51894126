"""The rule extractor's vocabulary and its table of rules (``capture.rules`` applies them).

Each rule is a pattern and a *reading* (kind, category, scope, importance, confidence, reason) that
turns a matching clause into a third-person memory; *markers* ("actually,", "remember that",
"in this repo,") set how a clause is read before the rules run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from capture.changes import Change
from capture.proposals import ProposedMemory
from capture.text import (
    has_schedule,
    is_specific,
    is_technical,
    reads_as_statement,
    third_person,
    word_set,
)
from capture.vocabulary import (
    ACQUAINTANCES,
    BODY_MEASURES,
    BUSINESSES,
    FAMILY,
    FOODS,
    HEALTH,
    HOUSEHOLD,
    NOT_CONVENTION_VERBS,
    NOT_SCHEDULE_VERBS,
    PROFILE_ADJECTIVES,
    PROFILE_NOUNS,
    PROJECT_NOUNS,
    ROLES,
    STATE,
    TRADES,
)

ICASE = re.IGNORECASE
_ADV = r"(?:\s+(?:really|much|strongly|generally|usually|definitely|personally|also|still|always|mostly|totally))*"
_HABIT = r"(?:\s+(?:always|never|usually|generally|typically|normally|mostly))+"
PARTICLE = re.compile(r"^(?:(?:to|on|that|with|for|about|using)\s+)+", ICASE)
CLAUSE_SPLIT = re.compile(
    r"\s*(?:;|,\s+so\s+|(?:,?\s+(?:and|but|plus)\s+(?:also\s+)?|,\s+)"
    r"(?=(?:i|i'm|i've|i'd|i'll|we|we're|we've|we'll|my|our|the team|team\s+[a-z]+(?:ed|s)|please|let's)\b)"
    r"|,\s+(?=(?:use|always|don't|do not|it's|it is|it was|it\s+[a-z]+(?:s|ed)|she|he|she's|he's|they)\b)"
    # ", and releases are tagged vX": a new subject with its own verb.
    r"|,\s+(?:and|but)\s+(?=(?:the\s+|our\s+)?[\w.-]+(?:\s+[\w.-]+)?\s+(?:is|are|was|were|will|has|have|gets?)\b)"
    r"|,\s+(?=(?-i:[A-Z])[\w.-]*\s+(?:is|are|was|were|will)\b))",
    ICASE,
)
TEAM = re.compile(r"\b(?:the team|the team's|(?:this|the) (?:repo|repository|project|codebase|monorepo))\b", ICASE)
DECISION_WORDS = re.compile(r"\b(?:decided|agreed|chose|settled on|will use|is going to use|decision)\b", ICASE)
PREFERENCE_WORDS = re.compile(
    r"\b(?:prefers|likes|loves|hates|dislikes|would rather|wants the assistant|"
    r"does not want the assistant)\b",
    ICASE,
)
_NOT_IMPERATIVE = word_set(
    "mind heard seen thought knew again ever worry bother know think care be get apologize "
    "apologise panic forget hesitate"
)
INTRO = re.compile(
    r"^(?:after\s+[^,]{3,40}?|in the end|eventually|finally|at last|yesterday|today|last (?:week|month|year|sprint)|"
    r"this (?:morning|week)|these days|nowadays|now|"
    # "doc says my blood pressure is too high": what a doctor found, said of the user.
    r"(?:my\s+|the\s+)?(?:doc|doctor|gp|dentist|physio|consultant|specialist)\s+(?:says|said|thinks|confirmed|"
    r"told me)(?:\s+that)?)\s*,?\s+(?=(?:we|i|i'm|i've|the team|our|my)\b)",
    ICASE,
)
DATED_INTRO = re.compile(r"^(?:yesterday|today|last (?:week|month|year)|this (?:morning|week))\b", ICASE)
# What a diet or a condition rules out, said plainly so "is there anything I can't eat?" finds it.
DIET_GLOSSES = tuple(
    (re.compile(pattern, ICASE), gloss)
    for pattern, gloss in (
        (r"^(?!.*\bgluten\b).*\b(?:celiac|coeliac)\b", "so the user can't eat gluten"),
        (r"^(?!.*\bdairy\b).*\blactose[- ]intoleran(?:t|ce)\b", "so the user can't eat most dairy"),
    )
)
# Said at the end of a clause, these mark a change of mind and are not part of the statement.
CHANGE_TAIL = re.compile(
    r"(?:,?\s+(?:now|these days|nowadays|from now on|going forward|from here on|instead|any\s?more|again))+$", ICASE
)
CHANGE_HEAD = re.compile(r"^(?:these days|nowadays|now)\b", ICASE)
# "We now deploy on Fridays", "I'm now on Linux": a change said mid-clause (kept in the text).
CHANGE_MID = re.compile(r"^(?:i|we|the team)(?:'m| am|'re| are|'ve| have)?\s+now\b", ICASE)
NEVER_AGAIN = re.compile(r"\bto\s+(?P<verb>[a-z]+)\s+(?P<rest>.+?)\s+never again\b", ICASE)
# The content of a change that is no statement on its own ("it's X, not Y"), until it is resolved.
UNSTATED = "-"


@dataclass(frozen=True)
class Reading:
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
    reading: Reading
    needs_marker: bool = False
    needs_specific: bool = False


Rules = tuple[_Rule, ...]


@dataclass
class Found:
    """A proposal in the making, with the change of mind it states (if any)."""

    proposal: ProposedMemory
    change: Change | None = None
    signalled: bool = False
    reading: Reading | None = None


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
    known = words[-1] in PROFILE_NOUNS or words[0] in PROFILE_ADJECTIVES
    if not (known or re.fullmatch(FAMILY, words[-1]) or is_specific(match["rest"])):
        return None
    return third_person(match.string)


def _imperative(text: str) -> Callable[[re.Match[str]], str | None]:
    def build(match: re.Match[str]) -> str | None:
        first = match["rest"].split()[0].lower().strip(",.;:!")
        return None if first in _NOT_IMPERATIVE else _template(text)(match)

    return build


def _household(match: re.Match[str]) -> str:
    """A statement about the user's family, where "we" and "us" are the household, not the team."""
    text = re.sub(r"\b(?:we|us)\b", "the user's family", match.string, flags=ICASE)
    return third_person(re.sub(r"\bour\b", "the user's", text, flags=ICASE))


def _household_event(match: re.Match[str]) -> str | None:
    """ "we adopted a greyhound", "our son Arjun was born in may": the household's life, not the
    team's work (nothing of a project is named)."""
    text = match.string
    if not HOUSEHOLD.search(text) or PROJECT_NOUNS.search(text) or is_technical(text):
        return None
    if len(text.split()) < 3:
        return None
    return _household(match)


def _life_event(match: re.Match[str]) -> str | None:
    """ "I started a new job at Acme", "I ran my first marathon": the user's life, not a work step
    ("I started refactoring the parser" names code and is left out)."""
    text = match.string
    if is_technical(text) or PROJECT_NOUNS.search(text) or len(text.split()) < 4:
        return None
    return third_person(text)


def _none_for_me(match: re.Match[str]) -> str:
    return f"the user has no {match['food'].lower()}{third_person(match['rest'])}"


def _place(match: re.Match[str]) -> str:
    return f"the user lives in {match['place']}"


def _team_statement(match: re.Match[str]) -> str | None:
    verb = match["verb"].lower()
    if (
        verb in NOT_CONVENTION_VERBS
        or verb.endswith("ed")
        or not (is_specific(match["rest"]) or is_technical(match.string) or has_schedule(match["rest"]))
    ):
        return None
    return third_person(match.string)


def _statement(match: re.Match[str]) -> str | None:
    """A bare statement ("The staging environment gets wiped every Sunday night") about the project."""
    text = match.string
    if not (reads_as_statement(text) and (has_schedule(text) or is_specific(text)) and PROJECT_NOUNS.search(text)):
        return None
    return third_person(text)


def _our(match: re.Match[str]) -> str | None:
    text = match.string
    return third_person(text) if reads_as_statement(text) and (is_specific(text) or is_technical(text)) else None


def _scheduled(match: re.Match[str]) -> str | None:
    verb = match["verb"].lower()
    if verb in NOT_SCHEDULE_VERBS or not has_schedule(match.string):
        return None
    return third_person(match.string)


def _reading(kind: str, category: str, scope: str, importance: float, confidence: float, reason: str) -> Reading:
    return Reading(kind, category, scope, importance, confidence, reason)


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
CHANGED = _reading("", "", "", 0.7, 0.8, "The user changed their mind.")

# "the team (6 of us) does ..." carries an aside.
_WE = r"^(?:we|the team)(?:\s+\([^)]{1,30}\))?"
_SWITCH = r"(?:go with|use|stick with|stick to|standardi[sz]e on|adopt|switch to|move to|migrate to|keep using)"
_IMPERATIVE_VERBS = (
    r"(?:use|prefer|avoid|write|put|keep|name|add|run|format|default to|stick to|stick with|call|place|prefix|"
    r"include|document|test|check|ask|answer|reply|respond|explain)\b"
)


def _rules(reading: Reading, build: _Builder, *patterns: str, marker: bool = False, specific: bool = False) -> Rules:
    return tuple(_Rule(re.compile(p, ICASE), build, reading, marker, specific) for p in patterns)


# Order matters: the first rule whose pattern matches decides (habits before plain "I use").
RULES: Rules = (
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
        rf"(?P<rest>(?:type\s+[12]\s+)?{STATE}.*)",
        rf"^i(?:'ve| have)(?:\s+got)?(?:\s+also)?\s+(?!a\s+(?:question|problem|bug|meeting|call|idea|feeling)\b)"
        rf"(?P<rest>(?:.*\b{HEALTH}\b.*|(?:a|an|one|two|three|four|five|\d+)\s+(?:[\w-]+\s+){{0,2}}?{FAMILY}\b.*|"
        rf"twins\b.*))",
        r"^i(?:'m| am)\s+(?:currently\s+|also\s+)?(?:training for|learning|studying|preparing for|saving (?:up )?for|"
        r"recovering from|expecting)\s+(?P<rest>.+)",
        r"^i\s+take\s+(?P<rest>.*\b(?:medication|meds|medicine|pills?|insulin|vitamins?|supplements?|inhaler)\b.*)",
        rf"^i(?:(?:'ve| have)(?:\s+(?:just|now|also|finally|officially))?\s+(?:gone|become|turned|been)|"
        rf"\s+(?:went|turned|became|keep))(?:\s+(?:properly|fully|officially|completely|totally|strictly))?\s+"
        rf"(?P<rest>{STATE}.*)",
        rf"^i\s+(?:get|suffer from|struggle with|live with)\s+(?P<rest>.*\b{HEALTH}\b.*)",
        r"^i(?:\s+(?:never|don't|do not|rarely|only|can't|cannot))\s+(?:eat|drink|smoke)\b\s*(?P<rest>.+)",
        rf"^i\s+(?:can't|cannot|can not|don't|do not|never)\s+(?:do|have|handle|tolerate|stomach|digest)\s+"
        rf"(?P<rest>{FOODS}\b.*)",
        rf"^i(?:'ve| have)?\s+been\s+off\s+(?P<rest>{FOODS}\b.*)",
        rf"^(?P<rest>{FOODS}\s+(?:makes|gives|leaves)\s+me\b.+)",
        rf"^my\s+(?P<rest>(?:[\w-]+\s+){{0,2}}?(?:allerg(?:y|ies)|intolerances?|diagnosis|diet|{BODY_MEASURES}|{HEALTH})"
        rf"\s+(?!is\s+(?:a|an|that|this|so|very|kinda|such)\b).+)",
        r"^i(?:'m| am)\s+(?:on|following|doing)\s+(?P<rest>(?:an?\s+)?(?:[\w-]+\s+){0,3}diet\b.*)",
    ),
    # "no red meat for me, just chicken and fish".
    *_rules(_PERSONAL, _none_for_me, rf"^(?:no|zero)\s+(?P<food>(?:[\w-]+\s+)?{FOODS})\s+for\s+me\b(?P<rest>.*)"),
    *_rules(_PERSONAL, _household, rf"^my\s+(?P<rest>{FAMILY}(?:\s+(?-i:[A-Z])[\w'-]+)?\s+(?!is\b|are\b).+)"),
    # "dad broke his ankle": a parent named as people name their own, without "my".
    *_rules(
        _PERSONAL,
        _template("the user's {rest}"),
        r"^(?P<rest>(?:mom|mum|dad|grandma|grandpa|granny|nan|nana)(?:'s)?\s+(?!is\b|are\b|and\b|or\b)[a-z][\w'-]*\s.+)",
    ),
    *_rules(_USER_FACT, _whole, rf"^my\s+(?P<rest>{ACQUAINTANCES}(?:\s+[a-z][\w'-]*)?\s+(?!is\b|are\b|'s\b).+)"),
    *_rules(
        _PERSONAL,
        _template("the user's family has {rest}"),
        rf"^we\s+(?:have|'ve got|have got)\s+(?P<rest>(?:(?:[\w-]+\s+){{0,3}}?{FAMILY}|twins)\b.*)",
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
        r"^i(?:'m| am)(?:\s+(?:just|finally|officially|also))*\s+(?:starting|joining|moving to|switching to)\b"
        r"\s*(?P<rest>.+)",
    ),
    *_rules(
        _USER_FACT,
        _place,
        r"^i(?:'ve| have)?(?:\s+(?:just|recently))*\s+(?:moved|relocated)\s+(?:back\s+)?to\s+"
        r"(?P<place>(?-i:[A-Z])[\w'.-]*(?:\s+(?-i:[A-Z])[\w'.-]*)*)(?:\s+(?:last|this|in|a|two|few)\b.*)?$",
    ),
    *_rules(_USER_FACT, _profile, r"^my\s+(?P<thing>(?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:is|are)\s+(?P<rest>.+)"),
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
        r"^i\s+teach\s+(?!myself\b|(?:my|the)\s+(?:kids?|son|daughter|dog)\b)(?P<rest>.+)",
        r"^i\s+(?:freelance|volunteer|moonlight|temp)\s+(?P<rest>(?:as|at|for)\b.+)",
        # "im the mobile lead", "i'm the only ux designer at a 30 person startup".
        rf"^i(?:'m| am)\s+(?P<rest>the\s+(?:(?:only|new|sole|main|head|senior|junior|lead)\s+)?"
        rf"(?!(?:worst|best|biggest|worse|better|last|first|one)\b)(?:[\w-]+\s+){{0,2}}?"
        rf"{ROLES}\b.*)",
        # "i do 3d modelling at a tiny indie game studio", "i cook on the line at a wee bistro":
        # something done, as a habit, at a place of work.
        rf"^i\s+(?!(?:had|ate|eat|met|meet|was|saw|see|got|get|went|go|left|stayed|stay|bought|buy|paid|pay|sat|"
        rf"have|grab|grabbed|shop|park|drink|drank|tried|try|found|booked|book|called|call|ordered|order|"
        rf"stopped|stop)\b)(?P<rest>[a-z]+(?<!ed)(?:\s+[\w-]+){{0,3}}?\s+at\s+(?:an?|the|my)\s+(?:[\w-]+\s+){{0,3}}?"
        rf"{BUSINESSES}\b.*)",
        rf"^i\s+(?:run|own|co-?own|manage)\s+(?P<rest>(?:an?|my own|my|the)\s+(?:[\w-]+\s+){{0,2}}?{BUSINESSES}\b.*)",
        rf"^i\s+do\s+(?P<rest>.+\bfor a living\b.*|(?:[\w-]+\s+){{0,2}}?{TRADES}\s+(?:for|at|in|with)\b.+)",
        r"^i(?:'ve| have)\s+been\s+an?\s+(?!(?:bit|little|lot|mess|wreck|nightmare)\b)"
        r"(?P<rest>[\w-]+(?:\s+[\w-]+){0,3}\s+(?:for|since)\b.+)",
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
        r"^i(?:'m| am)(?:\s+(?:now|also|still))?\s+(?P<verb>[a-z]+ing)\b\s*(?P<rest>.+)",
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

"""Small English-text helpers shared by the rule-based extractors.

Deliberately modest: sentence splitting that survives chat text, filler stripping, and a
first/second-person to third-person rewrite ("I prefer" -> "the user prefers", "we use" ->
"the team uses", "your tests" -> "the assistant's tests") with the verb agreement that needs.
Text inside backticks is code and is never rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterator


def word_set(words: str) -> frozenset[str]:
    """The whitespace-separated words of ``words``: long vocabularies stay readable in source."""
    return frozenset(words.split())


_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# Pasted code, shell sessions and quoted text are not the speaker's own statements.
_NON_PROSE_LINE = re.compile(r"^(?: {4}|\t|\$ |>>> ?|> ?)")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|vs|cf|approx|Mr|Mrs|Ms|Dr)\.", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_FILLERS = re.compile(
    r"^(?:(?:um+|uh+|erm+|hmm+|ok(?:ay)?|alright|all right|so|well|oh|ah|hey|hi|hello|btw|by the way|fyi|"
    r"just fyi|also|and|but|anyway|anyways|basically|honestly|just so you know|for the record|for context|"
    r"quick note|one more thing|yeah|yes|yep|right|cool|great|perfect|sure|agreed|sounds good|makes sense|"
    r"thanks|thank you|nice|got it|ugh|omg|wow|yay|phew|oof|welp|guess what|update|"
    r"(?:(?:big|good|bad|great|sad|some|exciting|quick)\s+)?news)(?:[,:;!.\s]+|$))+",
    re.IGNORECASE,
)
_INLINE_FILLERS = re.compile(r"\s*\b(?:um+|uh+|erm+)\b,?", re.IGNORECASE)
_TRAILING_FILLERS = re.compile(
    r"(?:[,\s]+(?:btw|fyi|lol|haha|thanks|thx|please|though|then))+\s*([.!?]*)$", re.IGNORECASE
)

_CONTRACTIONS = {
    "i'm": "the user is",
    "i've": "the user has",
    "i'd": "the user would",
    "i'll": "the user will",
    "we're": "the team is",
    "we've": "the team has",
    "we'd": "the team would",
    "we'll": "the team will",
    "you're": "the assistant is",
    "you've": "the assistant has",
    "you'll": "the assistant will",
    "you'd": "the assistant would",
}
_OBJECTS = {
    "me": "the user",
    "my": "the user's",
    "mine": "the user's",
    "myself": "the user",
    "us": "the team",
    "our": "the team's",
    "ours": "the team's",
    "ourselves": "the team",
    "your": "the assistant's",
    "yours": "the assistant's",
    "yourself": "the assistant",
    "i": "the user",
    "we": "the team",
    "you": "the assistant",
}
_SUBJECTS = {"i": "the user", "we": "the team", "you": "the assistant"}
_ADVERBS = (
    "no longer|always|never|usually|generally|often|also|really|just|mostly|only|still|typically|normally|actually|all|"
    "both|now|sometimes|rarely|definitely|personally|strongly|much|currently|mainly|primarily|already|finally"
)
_CONTRACTION_RE = re.compile(r"\b(" + "|".join(_CONTRACTIONS) + r")\b", re.IGNORECASE)
# "you" is a subject only at the start of a clause; elsewhere it is an object ("tell you").
_SUBJECT_RE = re.compile(
    rf"\b(?P<subject>i|we|you)\b(?![/.'’-]\w)(?P<adverbs>(?:\s+(?:{_ADVERBS}))*)"
    rf"\s+(?P<verb>(?!(?:i|we|you)\b)[a-z][\w'-]*)",
    re.IGNORECASE,
)
_OBJECT_RE = re.compile(r"\b(" + "|".join(_OBJECTS) + r")\b(?![/.'’-]\w)", re.IGNORECASE)
_CODE_SPAN = re.compile(r"(`[^`]*`)")

_QUESTION = re.compile(
    r"^(?:what|how|why|which|where|who|whom|whose|can|could|would|will|do(?!\s+not\b)|does|did|is|are|was|were|"
    r"should|shall|has|may|am)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(
    r"^(?:if|suppose|supposing|imagine|assuming|assume|what if|let's say|say we|in case|unless|even if|"
    r"were we|had we)\b|\b(?:if (?:i|we)|hypothetically|in theory|would have|were to|in an ideal world|i wish)\b",
    re.IGNORECASE,
)
_UNCERTAIN = re.compile(
    r"\b(?:not sure|unsure|don't know|do not know|no idea|not certain|doubt|wonder|wondering|maybe|perhaps|probably|"
    r"possibly|might|undecided|haven't decided|have not decided|hasn't been decided|didn't decide|did not decide|"
    r"not decided|never decided|never agreed|not yet|still deciding|still debating|thinking about|considering|"
    r"i guess|i think|i believe|i suppose|not convinced|kind of|sort of|tbd|to be decided)\b",
    re.IGNORECASE,
)

_TECH = re.compile(
    r"`|\b\w+\.(?:py|js|ts|tsx|go|rs|java|rb|sql|md|toml|ya?ml|json|sh)\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w*\b|\b[a-z_]{2,}\.[a-z_]{2,}\b|"
    r"\b(?:Go|Golang|CI|IDE|ORM|SQL|REST|JSON|YAML|CLI|PRs?)\b|"
    r"(?i:\b(?:code|coding|functions?|methods?|class(?:es)?|variables?|tests?|testing|typ(?:e|ing)|hints?|lint\w*|"
    r"format\w*|tabs?|spaces|indent\w*|commits?|branch(?:es)?|pull requests?|merge|rebase|APIs?|endpoints?|"
    r"databases?|quer(?:y|ies)|schemas?|migrations?|config\w*|settings|validat\w*|pydantic|docstrings?|comments?|librar(?:y|ies)|frameworks?|"
    r"packages?|dependenc(?:y|ies)|editor|terminal|shell|scripts?|exceptions?|errors?|logging|logs?|"
    r"async|GraphQL|Docker|Kubernetes|deploy\w*|Python|JavaScript|TypeScript|Rust|Java|"
    r"Ruby|Kotlin|Swift|React|Vue|Django|Flask|FastAPI|Postgres(?:QL)?|MySQL|SQLite|Redis|git|GitHub|"
    r"pytest|ruff|mypy|npm|pnpm|yarn|poetry|pip|f-strings?|naming|Vim|Neovim|VS ?Code|"
    r"Emacs|macOS|Linux|Windows)\b)",
)
# Something a reader can pin down: a tool, a path, a number, a proper name mid-sentence.
_SPECIFIC = re.compile(_TECH.pattern + r"|\d|\s[A-Z]\w*|/|\w\.\w")

_TRANSIENT = re.compile(
    r"\b(?:for now|right now|today|tonight|tomorrow|this time|just this once|at the moment|temporarily|yet|"
    r"failing|broken|crashing|for this (?:task|bug|ticket|pr|one|session|file|function|change))\b|\bhere$",
    re.IGNORECASE,
)
_VAGUE = re.compile(
    r"^(?:it|this|that|these|those|them|they|one|ones|both|either|neither|you|so|too|"
    r"the (?:first|second|third|last|other|same)(?: one)?|option\s+\w+|"
    r"your (?:suggestion|idea|approach|version|proposal|way|solution|code|answer)|what you \w+)\b",
    re.IGNORECASE,
)
# "it", "this", "those"... point into the conversation, unless they name the project itself.
_DEICTIC = re.compile(
    r"\b(?:it|them|this|these|those)\b"
    r"(?!\s+(?:repo|repository|project|codebase|monorepo|team|service|app|company|org)s?\b)"
    # "since the start of this month" is a date, not a pointer.
    r"(?!\s+(?:week|month|year|morning|afternoon|evening|weekend|spring|summer|autumn|fall|winter|sprint|quarter)\b)"
    r"|^how\b",
    re.IGNORECASE,
)
_STATEMENT_VERB = re.compile(
    r"\b(?:is|are|was|were|uses?|runs?|lives?|goes|go|belongs?|should|must|needs?|has|have|means|requires?|"
    r"takes?|deploys?|ships?|contains?|points?|depends?|can|cannot|can't|will|won't|doesn't|don't|never|always|"
    r"returns?|logs?|starts?|ends?|gets?|happens?|stays?|keeps?|stores?|sends?|works?|sits?|comes?|lands?)\b|"
    r"'s\b|'re\b",
    re.IGNORECASE,
)

_KEEP_VERBS = word_set(
    """can could will would shall should must may might can't cannot couldn't won't wouldn't shouldn't
    mustn't didn't did had was went chose made wrote saw took ran found got built thought knew began broke
    left kept felt spent sent told said paid met led brought bought caught taught sought won lost meant understood quit
    forgot gave came became drove grew held heard stood swore wore tore rode spoke stole woke sold"""
)
_IRREGULAR_VERBS = {
    "am": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
}
_NOT_PAST = frozenset({"embed", "shred"})
# Past forms ending in "eed" ("need", "proceed" are not past).
_PAST_EED = word_set("agreed disagreed freed guaranteed decreed refereed")


def iter_lines(text: str) -> Iterator[tuple[str, bool]]:
    """``(line, is_bullet)`` for each line of prose, bullet marker removed, blank lines as ``""``.

    Fenced code, indented code, shell sessions and quoted text are left out: they are not
    the writer's own statements.
    """
    for line in _FENCED_CODE.sub("\n", text.replace("’", "'")).splitlines():
        if not _NON_PROSE_LINE.match(line):
            bullet = _BULLET.match(line)
            yield (line[bullet.end() :] if bullet else line).strip(), bullet is not None


def prose_lines(text: str) -> list[str]:
    """Non-empty lines of prose in ``text`` (see ``iter_lines``)."""
    return [line for line, _ in iter_lines(text) if line]


def split_sentences(text: str) -> list[str]:
    """Sentences of prose ``text``: one per line at least (see ``prose_lines``)."""
    sentences: list[str] = []
    for line in prose_lines(text):
        protected = _ABBREVIATION.sub(lambda m: m.group().replace(".", "\x00"), line)
        sentences += [p.replace("\x00", ".").strip() for p in _SENTENCE_END.split(protected) if p.strip()]
    return sentences


# Contractions typed without their apostrophe ("im the mobile lead", "ive gone vegan", "i cant
# do dairy"); only the ones no English word is spelled like ("ill", "id", "were", "wont" are).
_BARE_CONTRACTIONS = {
    "im": "i'm", "ive": "i've", "dont": "don't", "cant": "can't", "doesnt": "doesn't", "didnt": "didn't",
    "isnt": "isn't", "wasnt": "wasn't", "arent": "aren't", "havent": "haven't", "hasnt": "hasn't",
    "couldnt": "couldn't", "wouldnt": "wouldn't", "shouldnt": "shouldn't", "thats": "that's",
    "whats": "what's", "theyre": "they're", "youre": "you're", "weve": "we've", "shes": "she's",
}  # fmt: skip
_BARE_CONTRACTION = re.compile(rf"\b(?:{'|'.join(_BARE_CONTRACTIONS)})\b", re.IGNORECASE)


def with_apostrophes(text: str) -> str:
    """``text`` with the contractions of ``_BARE_CONTRACTIONS`` spelled out as contractions."""
    return _BARE_CONTRACTION.sub(lambda m: _keep_caps(m.group(), _BARE_CONTRACTIONS[m.group().lower()]), text)


def strip_fillers(text: str) -> str:
    """Drop conversational filler: leading "ok so", "btw", "um"; trailing "please", "thanks"."""
    text = _INLINE_FILLERS.sub("", text).strip()
    text = _FILLERS.sub("", text).strip()
    return _TRAILING_FILLERS.sub(r"\1", text).strip()


def third_person(text: str) -> str:
    """Rewrite first and second person into "the user" / "the team" / "the assistant"."""
    parts = _CODE_SPAN.split(text)
    return "".join(part if part.startswith("`") else _rewrite(part) for part in parts)


def _rewrite(text: str) -> str:
    text = _CONTRACTION_RE.sub(lambda m: _keep_caps(m.group(), _CONTRACTIONS[m.group().lower()]), text)
    text = _SUBJECT_RE.sub(_subject_verb, text)
    return _OBJECT_RE.sub(lambda m: _keep_caps(m.group(), _OBJECTS[m.group().lower()]), text)


def _subject_verb(match: re.Match[str]) -> str:
    subject = match["subject"]
    if subject.isupper() and len(subject) > 1:
        return match.group()  # "WE" as an acronym, not a pronoun
    if subject.lower() == "you" and not _starts_clause(match):
        return match.group()
    return f"{_SUBJECTS[subject.lower()]}{match['adverbs']} {conjugate(match['verb'])}"


def _starts_clause(match: re.Match[str]) -> bool:
    before = match.string[: match.start()].rstrip().lower()
    return not before or before.endswith((",", ";", ":", " that", " and", " when", " but", " if"))


def _keep_caps(original: str, replacement: str) -> str:
    # An all-caps word of two letters or more is an acronym ("US", "ME"), not a pronoun.
    return original if original.isupper() and len(original) > 1 else replacement


def conjugate(verb: str) -> str:
    """Third-person singular present of ``verb``; modal and past forms stay as they are."""
    lower = verb.lower()
    if lower in _IRREGULAR_VERBS:
        return _IRREGULAR_VERBS[lower]
    past = (lower.endswith("ed") and not lower.endswith("eed") and lower not in _NOT_PAST) or lower in _PAST_EED
    if lower in _KEEP_VERBS or past or lower.endswith("n't"):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finish_sentence(text: str) -> str:
    """One clean sentence: single spaces, capital first letter, exactly one final period."""
    text = " ".join(text.split()).strip(" ,;:-—")
    text = re.sub(r"\s+([,;:])", r"\1", text).rstrip(".!?…").rstrip(" ,;:-—")
    if not text:
        return ""
    if text[0].islower():
        text = text[0].upper() + text[1:]
    return text + "."


def lower_first(text: str) -> str:
    """Lower-case the first letter of an ordinary capitalised word ("Tests" but not "API")."""
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        return text[0].lower() + text[1:]
    return text


def is_question(sentence: str) -> bool:
    """A question, with or without its question mark ("can you add a test")."""
    return sentence.rstrip().endswith("?") or bool(_QUESTION.match(sentence))


def is_hedged(sentence: str) -> bool:
    """Hypothetical ("if I preferred...") or uncertain ("I'm not sure we decided...")."""
    return bool(_HYPOTHETICAL.search(sentence) or _UNCERTAIN.search(sentence))


def is_technical(text: str) -> bool:
    """Mentions code, tools or programming vocabulary."""
    return bool(_TECH.search(text))


def is_specific(text: str) -> bool:
    """Names something concrete: a tool, path, number, version or proper name."""
    return bool(_SPECIFIC.search(text))


def is_transient(text: str) -> bool:
    """Says it holds only for now: "for now", "this time", "yet", "failing", a trailing "here"."""
    return bool(_TRANSIENT.search(text))


def is_vague(text: str) -> bool:
    """Leans on the conversation: starts with "it"/"that"/"option B" or points at "this"/"those"."""
    return bool(_VAGUE.match(text) or _DEICTIC.search(text))


def reads_as_statement(text: str) -> bool:
    """Has a verb a statement of fact would use ("is", "uses", "should", "never"...)."""
    return bool(_STATEMENT_VERB.search(text))


_SCHEDULE = re.compile(
    r"\b(?:every|each)\s+(?:other\s+)?(?:day|morning|afternoon|evening|night|week|weekday|weekend|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b|"
    r"\b(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weeknights)\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+(?:mornings|afternoons|evenings|nights)\b|"
    r"\b(?:daily|weekly|nightly|monthly|fortnightly|biweekly)\b|\bnight shifts?\b|"
    # "4x a week", "3 days a week", "once a month", "twice per week"
    r"\b(?:\d+x|\d+\s+times|once|twice|thrice|(?:\d+|one|two|three|four|five|six|seven)\s+(?:days?|times|nights?))"
    r"\s+(?:a|per|every)\s+(?:day|week|month|year)\b",
    re.IGNORECASE,
)


def has_schedule(text: str) -> bool:
    """Says when something recurs: "every Monday", "on Tuesdays", "nightly", "Friday mornings"."""
    return bool(_SCHEDULE.search(text))

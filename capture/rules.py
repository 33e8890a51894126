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
from datetime import date
from typing import Any

from capture import rule_table as table
from capture import vocabulary
from capture.changes import Change, Known, Matcher, message_change, named_old, read_change
from capture.people import EARLIER_CHARS, names_said, object_named
from capture.proposals import ProposedMemory
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
    with_apostrophes,
)
from common.redaction import REDACTED, find_secrets
from conversations.dates import resolve as resolve_dates
from conversations.dates import said_on

_MIN_CHARS, _MAX_CHARS, _MIN_WORDS, _MAX_WORDS = 12, 300, 2, 45


# Leading markers set how a clause is read (a correction, "remember that", "from now on"), and
# context ("in this repo,", "when X,") is kept in the memory.
def _marker(pattern: str, **labels: Any) -> tuple[re.Pattern[str], table.Reading]:
    return re.compile(pattern, table.ICASE), table.Reading(durable=True, **labels)


_CORRECTION = _marker(
    r"^(?:actually|correction|to be clear|not quite|scratch that|that's (?:wrong|incorrect|not (?:right|correct|true))|"
    r"you're wrong|(?:sorry,?\s+)?i was wrong(?:\s+(?:earlier|before))?|my mistake|update)\b[\s,:;.!-]*|"
    r"^(?:no|nope)\s*[,:;.!-]+\s*",
    category="corrections",
    importance=0.7,
    reason="The user corrected the assistant.",
    change=True,
)
_MARKERS: tuple[tuple[re.Pattern[str], table.Reading], ...] = (
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
    table.ICASE,
)
_CONDITION_CONTEXT = re.compile(r"^(?P<prefix>(?:when|whenever)\s+[^,]{3,60}),\s+(?=\S)", table.ICASE)
_FOLLOW_ON = re.compile(r"^(?:i|i'm|i've|she|he|she's|he's|we|we're|they|they're)\b", table.ICASE)


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
    earlier = ""  # what the user said before this message in the window: whom "she" and "he" name
    for message in messages:
        if message.get("role") != "user":
            continue
        said = said_on(message.get("timestamp"), today or date.today())
        for found in _from_message(message.get("content", "")):
            proposal = _resolve(found, matcher)
            if proposal is None:
                continue
            proposal = glossed(dated(object_named(proposal, message.get("content", ""), earlier), said))
            key = re.sub(r"\W+", " ", proposal.content.casefold()).strip()
            if key not in seen:
                seen.add(key)
                proposals.append(proposal)
        for proposal in names_said(message.get("content", ""), proposals, earlier=earlier):
            proposals.append(proposal)
        earlier = f"{earlier} {message.get('content', '')}"[-EARLIER_CHARS:]
        replaced = _replaced(message.get("content", ""), matcher)
        if replaced is not None and replaced.content not in {p.content for p in proposals}:
            proposals.append(replaced)
    return proposals


def glossed(proposal: ProposedMemory) -> ProposedMemory:
    """A diet or condition with what it rules out added ("...celiac disease; so the user can't eat gluten")."""
    if proposal.category != "user-facts" or proposal.kind != "fact":
        return proposal
    for pattern, gloss in table.DIET_GLOSSES:
        if pattern.search(proposal.content) and gloss not in proposal.content:
            content = finish_sentence(f"{proposal.content.rstrip('.')}, {gloss}")
            return dataclasses.replace(proposal, content=content) if len(content) <= _MAX_CHARS else proposal
    return proposal


def _replaced(text: str, matcher: Matcher) -> ProposedMemory | None:
    """A change no clause stated on its own ("dropped X ... using Y now"): the memory naming X,
    rewritten with Y, when exactly one does."""
    change = message_change(text)
    if change is None:
        return None
    placeholder = ProposedMemory(
        content=table.UNSTATED,
        kind="fact",
        category="user-facts",
        reason="The user said what replaced what.",
        evidence=clip(text, 200),
    )
    return _resolve(table.Found(placeholder, change=change, signalled=True), matcher)


def dated(proposal: ProposedMemory, said: date) -> ProposedMemory:
    """The proposal with its relative dates resolved against the day they were said."""
    resolved = resolve_dates(proposal.content, said)
    if not resolved.event_date:
        return proposal
    return dataclasses.replace(proposal, content=finish_sentence(resolved.text), event_date=resolved.event_date)


def _resolve(found: table.Found, matcher: Matcher) -> ProposedMemory | None:
    """The proposal, as the successor of the memory its change of mind replaces when one is found."""
    proposal, change = found.proposal, found.change
    if change is None and not found.signalled:
        # A statement filling a one-value slot ("I live in Munich") still replaces the old value.
        successor = matcher.find(proposal.content, None, signalled=False)
    else:
        successor = matcher.find(proposal.content, change, signalled=found.signalled)
    if successor is None:
        # An elliptical change ("it's X, not Y") means nothing without the memory it corrects.
        return None if proposal.content == table.UNSTATED else proposal
    old = successor.memory
    content, kind = proposal.content, proposal.kind
    if successor.content:
        content, kind = successor.content, old.kind or proposal.kind
    if content == table.UNSTATED:
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


def _from_message(text: str) -> Iterator[table.Found]:
    correcting = False
    for sentence in split_sentences(with_apostrophes(text)):
        clean = strip_fillers(sentence)
        only_marker = _CORRECTION[0].match(clean)
        if only_marker and only_marker.end() == len(clean):
            correcting = True  # "That's wrong." -- the next sentence says what is right
            continue
        if _skip_sentence(clean):
            correcting = False
            told = _TOLD_IN_A_QUESTION.search(clean) if is_question(clean) else None
            if told and not _skip_sentence(told["told"]):
                told_readings, told_body = _take_markers(told["told"])
                yield from _from_sentence(told_body, told_readings, sentence)
            continue
        readings, body = _take_markers(clean)
        if correcting:
            readings.insert(0, _CORRECTION[1])
            correcting = False
        yield from _from_sentence(body, readings, sentence)


def _from_sentence(body: str, readings: list[table.Reading], sentence: str) -> Iterator[table.Found]:
    """The memories of one sentence: each clause on its own, then follow-on clauses."""
    previous: table.Found | None = None
    pending: list[table.Found] = []
    for clause in table.CLAUSE_SPLIT.split(body):
        clause_readings, clause_body = _take_markers(strip_fillers(clause))
        intro = table.INTRO.match(clause_body)
        clause_body = table.INTRO.sub("", clause_body)
        if intro and table.DATED_INTRO.match(intro.group()):
            # "Yesterday we adopted a dog": the date moves to the end, where it stays in the memory.
            clause_body = f"{clause_body.rstrip(' .!')} {intro.group().strip(' ,')}"
        clause_body = _with_subject(clause_body)
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


# A clause chat leaves without its subject ("started therapy, once a week", "starting at monzo on
# the 2nd", "been off gluten for a year"): the user's own life, told as a step they took or are taking.
_SUBJECTLESS = re.compile(
    r"^(?:(?:also|just|finally|recently|officially)\s+)*"
    rf"(?:(?P<past>started|joined|adopted|began|booked|signed up|went(?=\s+{vocabulary.STATE})|"
    r"(?:quit|gave up)(?!\s+(?:it|that|this)\b))|(?P<ing>starting|joining)|"
    r"(?P<perfect>been))\b",
    re.IGNORECASE,
)


# "team voted for github actions": the article chat drops before a verb.
_BARE_TEAM = re.compile(r"^team\s+(?=[a-z]+(?:ed|s)\b)", re.IGNORECASE)


def _with_subject(clause: str) -> str:
    if _BARE_TEAM.match(clause):
        return "the " + clause
    match = _SUBJECTLESS.match(clause)
    if match is None:
        return clause
    return ("i'm " if match["ing"] else "i've " if match["perfect"] else "i ") + clause


def _completes(previous: table.Found, clause: str) -> bool:
    """Adds ``clause`` to ``previous`` when it says what replaced what ``previous`` ended:
    "I no longer drive to work, I cycle" is one memory."""
    body = table.CHANGE_TAIL.sub("", clause.rstrip(" .!"))
    if previous.change is None or not previous.change.ending or not _FOLLOW_ON.match(body):
        return False
    if len(body.split()) > 10 or is_question(body) or is_vague(body) or _holds_secret(body):
        return False
    content = finish_sentence(previous.proposal.content).rstrip(".") + "; " + third_person(body)
    previous.proposal = dataclasses.replace(previous.proposal, content=finish_sentence(content))
    previous.change = dataclasses.replace(previous.change, new=body)
    return True


def _follow_on(clause: str, previous: table.Found, evidence: str) -> table.Found | None:
    """A clause no rule knows after a team rule or decision: "we decided X; releases go out Tuesdays"."""
    body = table.CHANGE_TAIL.sub("", clause.rstrip(" .!"))
    reading = previous.reading
    if reading is None or not (reading.scope == "project" or reading.kind == "decision"):
        return None
    if _FOLLOW_ON.match(body) or is_vague(body) or is_transient(body):
        return None
    if len(body.split()) < 3 or not reads_as_statement(body) or not (is_specific(body) or is_technical(body)):
        return None
    assembled = _assemble(third_person(body), reading, [], evidence)
    return None if assembled is None else table.Found(assembled, reading=reading)


def _holds_secret(text: str) -> bool:
    """A secret, or the marker of one redacted before the extractor saw the text (windows are
    stored redacted)."""
    return REDACTED in text or bool(find_secrets(text))


# "what snacks can i keep at my desk, has to be safe bc my peanut allergy is the anaphylaxis kind":
# a question that goes on to say something of the user, after a comma or a "because".
_TOLD_IN_A_QUESTION = re.compile(
    r"(?:,\s+(?:(?:and|but|so|plus|also|btw|tbh)\s+)?|\s+(?:bc|because|cause|cos|since)\s+)"
    r"(?P<told>(?:i'm|i am|i've|i have|my|i)\b[^?]*?)\s*$",
    re.IGNORECASE,
)


def _skip_sentence(sentence: str) -> bool:
    # Whatever else a sentence holding a secret says is usually about that secret.
    return (
        not sentence
        or is_question(sentence)
        or is_hedged(sentence)
        or _holds_secret(sentence)
        or bool(vocabulary.SECRETISH.search(sentence))
    )


def _take_markers(text: str) -> tuple[list[table.Reading], str]:
    """Strip leading markers off ``text``; return how they ask it to be read, and the rest."""
    readings: list[table.Reading] = []
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
                table.Reading(scope=scope, durable=True, explicit=project, prefix=third_person(context["prefix"]))
            )
            text = lower_first(text[context.end() :])


def _propose(body: str, readings: list[table.Reading], evidence: str) -> table.Found | None:
    words = len(body.split())
    if not _MIN_WORDS <= words <= _MAX_WORDS or _holds_secret(body):
        return None
    body = body.rstrip(" .!")
    signalled = any(r.change for r in readings) or bool(table.CHANGE_HEAD.match(body) or table.CHANGE_MID.match(body))
    changed = read_change(body)
    if changed is not None:
        statement, change = changed
        reading = table.CHANGED
        if change.elliptical and statement:
            # "I switched to X" is a choice of the user's; "we moved X to Y", the team's decision.
            switch_kind = "preference" if statement.lower().startswith("the user ") else "decision"
            reading = dataclasses.replace(table.CHANGED, kind=switch_kind)
        found = _assemble(statement or table.UNSTATED, reading, readings, evidence, keep_category=True)
        if found is None:
            return None
        return table.Found(found, change=change, signalled=True)
    if is_transient(body):
        return None
    body = table.NEVER_AGAIN.sub(r"never to \g<verb> \g<rest> again", body)
    stripped = table.CHANGE_HEAD.sub(
        "", table.CHANGE_TAIL.sub("", body) if not body.endswith(" again") else body
    ).strip(" ,")
    signalled = signalled or stripped != body
    body = stripped
    if is_transient(body) or len(body.split()) < _MIN_WORDS:
        return None
    durable = any(r.durable for r in readings) or signalled
    for rule in table.RULES:
        match = rule.pattern.match(body)
        if match is None or (rule.needs_marker and not durable):
            continue
        rest = table.PARTICLE.sub("", (match.groupdict().get("rest") or "x").strip())
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
        content, base = third_person(body), table.Reading(confidence=0.6)
    proposal = _assemble(content, base, readings, evidence)
    if proposal is None:
        return None
    old = named_old(body)
    return table.Found(
        proposal,
        change=Change(old=old) if old else None,
        signalled=signalled,
        reading=dataclasses.replace(base, prefix=""),
    )


def _assemble(
    content: str, base: table.Reading, readings: list[table.Reading], evidence: str, *, keep_category: bool = False
) -> ProposedMemory | None:
    prefixes = [r.prefix for r in readings if r.prefix]
    text = finish_sentence(", ".join([*prefixes, content]))
    if not _MIN_CHARS <= len(text) <= _MAX_CHARS and content != table.UNSTATED:
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
        content=text if content != table.UNSTATED else table.UNSTATED,
        kind=kind,
        category=category,
        scope=scope,
        importance=max(r.importance for r in overrides),
        confidence=max(r.confidence for r in overrides),
        reason=next((r.reason for r in reversed(overrides) if r.reason), "The user stated it."),
        evidence=clip(evidence, 200),
    )


_PERSONAL_WORDS = re.compile(
    rf"\b(?:{vocabulary.HEALTH}|{vocabulary.STATE}|{vocabulary.FAMILY}|allergic|allergy|diagnosed|doctor|pregnan(?:t|cy)|birthday|my\s+(?:wife|husband|"
    r"partner|home|address|phone|email))\b|\bthe user's\s+(?:family|home|address|phone|email|doctor|health|diet)\b",
    table.ICASE,
)


def is_personal(content: str) -> bool:
    """Whether a statement is about the speaker's person or household (health, diet, family, pets,
    contact, home): such a fact is never the project's, whichever extractor proposed it."""
    return bool(_PERSONAL_WORDS.search(content)) and not table.DECISION_WORDS.search(content)


def _infer(content: str) -> tuple[str, str, str]:
    """Labels for a statement no rule recognised, read from its rewritten content."""
    scope = "project" if table.TEAM.search(content) else "user"
    if table.DECISION_WORDS.search(content):
        return "decision", "architectural-decisions", scope
    if table.PREFERENCE_WORDS.search(content):
        return "preference", "?", scope
    if scope == "user" and re.search(r"\bthe user\b", content, table.ICASE):
        return "fact", "user-facts", scope
    return "fact", "project-conventions", scope

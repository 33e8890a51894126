"""Who the user speaks of: the name said of someone close ("her name is pixel", "my sister nora is
visiting"), what a sentence starting with "she" or "he" says of them, and whom "for her" or "with him"
stands for, read from what the user said before in the window. ``capture.rules`` adds these to
the memories its table of rules finds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from capture import rule_table as table
from capture import vocabulary
from capture.proposals import ProposedMemory
from capture.text import clip, finish_sentence, is_vague, strip_fillers

# How far back in the window (characters) "she" and "he" look for whom they name.
EARLIER_CHARS = 600

_NAMED = re.compile(
    r"\b(?:(?:her|his|its)\s+name(?:'s|\s+is)|(?:she|he|it)(?:'s|\s+is)\s+(?:called|named))\s+"
    r"(?!(?:the|a|an|that|this)\b)(?P<name>[a-z][\w'-]+)\b",
    table.ICASE,
)
_RELATION = re.compile(
    rf"\b(?:{vocabulary.FAMILY}|manager|boss|supervisor|colleague|coworker|friend|mate|neighbou?r)\b", table.ICASE
)
# Whom "he" cannot name, and whom "she" cannot; anyone else (partner, friend, a pet) either.
_NOT_HE = re.compile(
    r"^(?:sisters?|daughters?|wife|girlfriend|fianc[ée]e|mom|mum|mother|grandma|grandmother|aunt|niece)$", table.ICASE
)
_NOT_SHE = re.compile(
    r"^(?:brothers?|sons?|husband|boyfriend|fianc[ée]|dad|father|grandpa|grandfather|uncle|nephew)$", table.ICASE
)
# What "it" can name: an animal, or a place or body the user belongs to ("got the offer from the
# startup!! it's called tidewise").
_IT_NAMES = re.compile(
    rf"\b(?:{vocabulary.PETS}|startup|company|firm|agency|employer|band|choir|club|gym|school|nursery|"
    r"podcast|newsletter|shop|restaurant|cafe|bakery|boat|car|van)\b",
    table.ICASE,
)
# How chat shortens a relation: "my bf kai", "my gf ayesha".
_SHORT_FOR = {"bf": "boyfriend", "gf": "girlfriend", "hubby": "husband", "wifey": "wife", "fiance": "fiancé"}
# "my sister nora is visiting", "my mate dev is coming now", "my dog rocco ate a sock": someone
# close named in passing, between the relation and what they do. The word after the name must be
# a verb (or "'s"), and the name no word of the sentence's own grammar.
_APPOSITIVE = re.compile(
    rf"\bmy\s+(?:(?:little|big|older|younger|baby|best|new|old)\s+)?"
    rf"(?P<who>{vocabulary.FAMILY}|{vocabulary.ACQUAINTANCES}|mate|buddy|pal|{'|'.join(_SHORT_FOR)})\s+"
    r"(?P<name>[a-z][a-z-]{1,19})(?:'s\b|\s+(?:is|was|has|had|wants?|wanted|said|says|got|gets|loves|likes|hates|"
    r"thinks|thought|starts|started|turns|turned|moved|lives|lived|works|worked|came|comes|went|goes|ate|broke|"
    r"made|makes|took|takes|called|texted|asked|told|found|just|finally|also|still|built|bought|cooks|cooked|"
    r"does|did|can|can't|will|keeps|kept|needs|needed|drives|drove|plays|played|helps|helped|and\s+i)\b)",
    table.ICASE,
)
# "biscuit (my cat) sits on the keyboard", "mochi (my pug)": a name with the relation in brackets.
_BRACKETED = re.compile(
    rf"\b(?P<name>[a-z][a-z-]{{1,19}})\s+\(\s*my\s+(?P<who>{vocabulary.FAMILY}|{vocabulary.ACQUAINTANCES}|"
    rf"{'|'.join(_SHORT_FOR)})\s*\)",
    table.ICASE,
)
_GRAMMAR_WORDS = (
    "is was has had got gets just really also finally always never still actually literally basically totally "
    "probably already and who which that said says wants loves likes thinks lives works moved started turned "
    "came went made took found told asked the a an this that my his her their our is are be been being "
    "will would can could should might must do does did not no so too very"
)
_NOT_NAMES = frozenset(_GRAMMAR_WORDS.split())
# "she's a yoga teacher in brighton", "he's from palermo originally": a statement about the one
# just spoken of, at the start of a sentence or a clause.
_PRONOUN_STATEMENT = re.compile(
    r"(?:^|[.!?;,]\s+)(?P<who>she|he)(?:'s|\s+is)\s+(?P<rest>(?:an?\s+[a-z][\w-]*|(?:originally\s+)?from)\b[^.!?;,]*)",
    table.ICASE,
)


def _named_one(pronoun: str, context: str) -> str | None:
    """The relation ``pronoun`` most likely names: the last one ``context`` speaks of that it can name."""
    if pronoun in ("it", "its"):
        things = list(_IT_NAMES.finditer(context))
        return things[-1].group().lower() if things else None
    for match in reversed(list(_RELATION.finditer(context))):
        who = match.group().lower()
        if not (
            (pronoun in ("he", "his", "him") and _NOT_HE.match(who))
            or (pronoun in ("she", "her") and _NOT_SHE.match(who))
        ):
            return who
    return None


# "my mom got diagnosed with diabetes. i'm cooking for her on sundays": whom "her" stands for.
_OBJECT_PRONOUN = re.compile(
    r"\b(?P<verb>for|with|to|visit(?:ing)?|see(?:ing)?|call(?:ing)?|help(?:ing)?|driv(?:e|ing)) (?P<pronoun>her|him)\b",
    table.ICASE,
)


def object_named(proposal: ProposedMemory, text: str, earlier: str) -> ProposedMemory:
    """``proposal`` with "for her" / "with him" naming the relation spoken of before it."""
    match = _OBJECT_PRONOUN.search(proposal.content)
    if match is None:
        return proposal
    said = re.search(rf"\b{re.escape(match.group())}", text, table.ICASE)
    who = _named_one(match["pronoun"].lower(), f"{earlier} {text[: said.start()] if said else text}")
    if who is None:
        return proposal
    content = f"{proposal.content[: match.start('pronoun')]}the user's {who}{proposal.content[match.end('pronoun') :]}"
    return dataclasses.replace(proposal, content=content)


def names_said(text: str, found: Sequence[ProposedMemory], *, earlier: str = "") -> list[ProposedMemory]:
    """ "we adopted a greyhound! her name is pixel", "my sister got me into it" ... "she's a yoga
    teacher, her name's katya": the name of the one just spoken of (in this message or the user's
    earlier ones in the window), a name said in passing ("my sister nora is visiting"), and what a
    sentence starting with "she"/"he" says of them."""
    named: list[ProposedMemory] = []
    pairs = [
        (_named_one(m.group().split()[0].lower().split("'")[0], f"{earlier} {text[: m.start()]}"), m["name"])
        for m in _NAMED.finditer(text)
    ]
    pairs += [
        (_SHORT_FOR.get(m["who"].lower(), m["who"].lower()), m["name"])
        for pattern in (_APPOSITIVE, _BRACKETED)
        for m in pattern.finditer(text)
        if m["name"].lower() not in _NOT_NAMES
    ]
    for who, name in pairs:
        # Kept beside a memory that only mentions them ("my girlfriend ruth thinks ..."): who is
        # called what is a standing fact, the remark is not.
        said_as_name = rf"\b(?:called|named|name is|name's)\s+{re.escape(name)}\b"
        if who is None or any(re.search(said_as_name, p.content, table.ICASE) for p in [*found, *named]):
            continue
        named.append(_about_someone(f"The user's {who} is called {name[0].upper()}{name[1:]}.", text, named_them=True))
    for match in _PRONOUN_STATEMENT.finditer(text):
        who = _named_one(match["who"].lower(), f"{earlier} {text[: match.start('who')]}")
        rest = strip_fillers(match["rest"]).strip()
        if who is None or len(rest.split()) < 2 or is_vague(rest):
            continue
        named.append(_about_someone(finish_sentence(f"The user's {who} is {rest}"), text, named_them=False))
    return named


def _about_someone(content: str, text: str, *, named_them: bool) -> ProposedMemory:
    """A fact about someone close to the user; who is called what weighs a little more than a remark."""
    return ProposedMemory(
        content=content,
        kind="fact",
        category="user-facts",
        importance=0.6 if named_them else 0.5,
        confidence=0.7 if named_them else 0.65,
        reason="The user named someone close to them."
        if named_them
        else "The user said something about someone close to them.",
        evidence=clip(text, 200),
    )

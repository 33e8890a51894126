"""Relative dates in what people say, resolved against when they said it.

"We adopted a greyhound on saturday" means one day when it is said and another a month later:
a memory must carry the day itself. :func:`resolve` rewrites the relative expressions people use
in chat ("yesterday", "last month", "this week", "on saturday", "two weeks ago", "in may") into dates, and
says which date the statement is about, so the memory can keep it (``metadata.event_date``).

Past is the default reading: memories mostly record what happened. A clause that speaks of the
future ("will", "going to", "next", "plan") reads a bare weekday or month forward instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_I = re.IGNORECASE
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
_FUTURE = re.compile(r"\b(?:will|'ll|going to|gonna|plan(?:s|ning)? to|next|tomorrow|upcoming|soon)\b", _I)
# A present tense that schedules ("the twins start nursery in april", "i'm moving in june"): a bare
# month read forward, unless something in the clause is plainly past.
_SCHEDULED = re.compile(
    r"\b(?:starts?|begins?|opens?|ends?|finishes|closes|(?:is|are|'s|'re|'m|am) due|starting|beginning|"
    r"moving|leaving|flying|visiting|travell?ing|getting married)\b",
    _I,
)
_PAST = re.compile(r"\b(?:was|were|had|did|got|went|came|began|started|ended|moved|left|born|ago|last|already)\b", _I)
_WEEKDAY = "|".join(WEEKDAYS)
_PARTS = "morning|afternoon|evening|night"
_MONTH = "|".join(MONTHS)
_COUNT = r"(?P<count>\d+|a couple of|an?|one|two|three|four|five|six)"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _I))
    for name, pattern in (
        ("day_before_yesterday", r"\bthe day before yesterday\b"),
        ("yesterday", r"\b(?:yesterday|last night)\b"),
        ("today", r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b"),
        ("tomorrow", r"\btomorrow\b"),
        # "on wednesday nights" is a habit, not a day.
        ("weekday", rf"\b(?P<which>last|this past|on|next|this)\s+(?P<day>{_WEEKDAY})\b(?!\s+(?:{_PARTS}s)\b)"),
        ("ago", rf"\b{_COUNT}\s+(?P<unit>days?|weeks?|months?|years?)\s+ago\b"),
        ("last_unit", r"\b(?P<which>last|next|this)\s+(?P<unit>week|month|year)\b(?!')"),
        ("month", rf"\b(?P<prep>in|since|last|this past)\s+(?P<month>{_MONTH})\b(?!\s+\d)"),
    )
)


# Words after which a resolved date needs no "in" of its own.
_BARE_BEFORE = re.compile(r"\b(?:of|since|until|till|by|from|for|during|through|throughout|in)\s*$", _I)


@dataclass(frozen=True)
class Resolved:
    """The text with its relative dates replaced, and the first date it speaks of (ISO: a day
    ``2026-03-08``, a month ``2026-02``, a year ``2025``; "" when it names none)."""

    text: str
    event_date: str = ""


def said_on(timestamp: str | None, default: date) -> date:
    """The day a message was said: its ``timestamp`` (ISO 8601) as written, else ``default``."""
    if timestamp:
        try:
            return datetime.fromisoformat(timestamp).date()
        except ValueError:
            pass
    return default


def resolve(text: str, said: date) -> Resolved:
    """``text`` with each relative date it holds resolved against the day it was ``said``."""
    future = bool(_FUTURE.search(text))
    found: list[tuple[int, str]] = []

    def replace(name: str) -> Callable[[re.Match[str]], str]:
        def build(match: re.Match[str]) -> str:
            phrase, value = _resolved(name, match, said, future)
            if not value:
                return match.group()
            found.append((match.start(), value))
            return phrase

        return build

    for name, pattern in _PATTERNS:
        text = pattern.sub(replace(name), text)
    first = min(found)[1] if found else ""
    return Resolved(text, first)


def annotate(text: str, said: date) -> str:
    """``text`` as said, each relative date followed by the date it means: "yesterday (2026-03-08)"."""
    future = bool(_FUTURE.search(text))

    def replace(name: str) -> Callable[[re.Match[str]], str]:
        def build(match: re.Match[str]) -> str:
            value = _resolved(name, match, said, future)[1]
            return f"{match.group()} ({value})" if value else match.group()

        return build

    for name, pattern in _PATTERNS:
        text = pattern.sub(replace(name), text)
    return text


def _resolved(name: str, match: re.Match[str], said: date, future: bool) -> tuple[str, str]:
    """(the phrase that replaces the match, the ISO value it names); ("", "") to leave it."""
    if name in ("day_before_yesterday", "yesterday", "today", "tomorrow"):
        shift = {"day_before_yesterday": -2, "yesterday": -1, "today": 0, "tomorrow": 1}[name]
        day = said + timedelta(days=shift)
        return f"on {day.isoformat()}", day.isoformat()
    if name == "weekday":
        which, weekday = match["which"].lower(), WEEKDAYS.index(match["day"].lower())
        forward = which == "next" or (which in ("on", "this") and future)
        if forward:
            day = said + timedelta(days=(weekday - said.weekday() - 1) % 7 + 1)
        else:
            day = said - timedelta(days=(said.weekday() - weekday - 1) % 7 + 1)
        return f"on {day.isoformat()}", day.isoformat()
    if name == "ago":
        count = int(match["count"]) if match["count"].isdigit() else _NUMBERS[match["count"].lower()]
        unit = match["unit"].lower().rstrip("s")
        if unit == "day":
            day = said - timedelta(days=count)
            return f"on {day.isoformat()}", day.isoformat()
        if unit == "week":
            day = said - timedelta(weeks=count)
            return f"in the week of {day.isoformat()}", day.isoformat()
        if unit == "month":
            year, month = _months_before(said, count)
            return f"in {MONTHS[month - 1].capitalize()} {year}", f"{year}-{month:02d}"
        return f"in {said.year - count}", str(said.year - count)
    if name == "last_unit":
        step = {"last": -1, "this": 0, "next": 1}[match["which"].lower()]
        unit = match["unit"].lower()
        # "since the start of this month": after "of" or "since" the date stands alone.
        lead = "" if _BARE_BEFORE.search(match.string[: match.start()]) else "in "
        if unit == "week":
            monday = said - timedelta(days=said.weekday()) + timedelta(weeks=step)
            return f"{lead}the week of {monday.isoformat()}", monday.isoformat()
        if unit == "month":
            year, month = _months_before(said, -step)
            return f"{lead}{MONTHS[month - 1].capitalize()} {year}", f"{year}-{month:02d}"
        return f"{lead}{said.year + step}", str(said.year + step)
    # A month without a year: the last one (or, said of the future, the next one) of that name.
    month = MONTHS.index(match["month"].lower()) + 1
    prep = match["prep"].lower()
    year = said.year
    forward = future or bool(_SCHEDULED.search(match.string) and not _PAST.search(match.string))
    if forward and prep == "in":
        year += 1 if month < said.month else 0
    elif month > said.month or (prep != "in" and month == said.month):
        year -= 1
    keep = "in" if prep in ("last", "this past") else prep
    return f"{keep} {MONTHS[month - 1].capitalize()} {year}", f"{year}-{month:02d}"


def _months_before(said: date, count: int) -> tuple[int, int]:
    index = said.year * 12 + (said.month - 1) - count
    return index // 12, index % 12 + 1

"""Find and redact secrets so that none is ever stored: not as (or inside) a memory, and not in
a conversation message, a capture window or an observation payload (every storage boundary
calls :func:`redact`; docs/adr/0015-secrets-redacted-at-every-boundary.md).

Two kinds of pattern: *shaped* secrets recognisable on their own (provider key formats,
JWTs, PEM private keys) and *labelled* secrets recognisable only by what precedes them
(``password: ...``, ``Authorization: Bearer ...``, ``api_key=...``, credentials inside a
connection URL). For labelled secrets only the value is replaced, so the redacted text still
reads as a sentence ("The staging password is [REDACTED].").

False positives are kept down deliberately: a labelled value must look like a value (not a
prose word such as "required"), generic ``token=``/``secret=`` values must be long and
high-entropy, and a bare UUID is not a secret.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any


def word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


REDACTED = "[REDACTED]"
_MAX_PASSES = 5


@dataclass(frozen=True)
class SecretMatch:
    """One secret found in a text: what it looks like and where it is (``text[start:end]``)."""

    kind: str
    start: int
    end: int


# Boundaries: a token must not continue an alphanumeric run on either side.
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"
_SHAPED: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("anthropic_key", re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}" + _E)),
    # The digit look-ahead keeps hyphenated words ("sk-learn-compatible-...") out.
    ("openai_key", re.compile(_B + r"sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}" + _E)),
    ("stripe_key", re.compile(_B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}" + _E)),
    ("aws_access_key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("github_token", re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})" + _E)),
    ("slack_token", re.compile(_B + r"xox[baprs]-[A-Za-z0-9-]{10,}" + _E)),
    ("google_api_key", re.compile(_B + r"AIza[0-9A-Za-z_-]{35}" + _E)),
    ("jwt", re.compile(_B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _E)),
)

# Labelled secrets: the named group "value" is what gets redacted. Labels are matched without
# their prefix ("DB_PASSWORD" matches at "PASSWORD"), and every repeat before a fixed token is
# bounded, so that a long run of word characters cannot make a pattern quadratic.
_NOT_REDACTED = r"(?!\[REDACTED\])"
_BEARER = re.compile(r"\bBearer\s+" + _NOT_REDACTED + r"(?P<value>[A-Za-z0-9._~+/=-]{16,})", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(
    r"\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@]{0,200}:" + _NOT_REDACTED + r"(?P<value>[^\s/@]+)@[^\s@/]", re.IGNORECASE
)
_PASSWORD = re.compile(
    r"(?:password|passwd|passphrase|pwd)\b[\"']?\s*(?P<sep>:=|[:=]|->|\bis\b|\bwas\b)\s*"
    + _NOT_REDACTED
    + r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<bare>[^\s\"',;:=][^\s\"',;]*))",
    re.IGNORECASE,
)
_ASSIGNMENT = re.compile(
    r"(?:api[ _-]?key|apikey|access[ _-]?key|secret(?:[ _-]?key)?|client[ _-]?secret|"
    r"(?:auth|access|refresh|bearer|session)?[ _-]?token)\b[\"']?\s*(?::=|[:=]|\bis\b)\s*[\"']?"
    r"(?P<value>[A-Za-z0-9_\-./+=~]{16,})",
    re.IGNORECASE,
)
# Words that follow "password is/:" in prose about passwords rather than a password.
_PROSE_WORDS = word_set(
    """a an the not no too very still now also always never only just required optional mandatory needed
    necessary stored saved kept set missing wrong incorrect correct right invalid valid expired empty blank
    same different weak strong long short hashed encrypted salted managed rotated changed reset reused shared
    secret secure insecure case-sensitive sensitive there here in at on of for to from with by and or but
    that this which what where when it its one two three four five six seven eight nine ten twelve
    mine yours his hers theirs ours your my our their new old default unknown"""
)
_PROSE_SUFFIXES = ("ed", "ing", "ly", "able", "ible")


# Numbers that are secrets only when their check digits agree: payment cards (13-19 digits, in
# groups of 4 or 4-6-5 separated by single spaces or hyphens, or run together; Luhn), IBANs
# (country, check digits, up to 30 letters and digits, spaces every 4 allowed; mod 97) and US
# social security numbers (ddd-dd-dddd, without the never-issued 000, 666 and 9xx areas).
_CARD = re.compile(
    r"(?<![\w-])(?:\d{4}(?P<sep>[ -]?)\d{4}(?P=sep)\d{4}(?P=sep)\d{1,7}"
    r"|\d{4}(?P<sep2>[ -]?)\d{6}(?P=sep2)\d{5})(?![\w-])"
)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    compact = iban.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _checked_numbers(text: str) -> list[SecretMatch]:
    found = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1:
            found.append(SecretMatch("payment_card", m.start(), m.end()))
    found += [SecretMatch("iban", m.start(), m.end()) for m in _IBAN.finditer(text) if iban_valid(m.group())]
    found += [SecretMatch("ssn", m.start(), m.end()) for m in _SSN.finditer(text)]
    return found


def find_secrets(text: str) -> list[SecretMatch]:
    """Every secret in ``text``, in order; overlapping matches are merged into one (named after the first)."""
    found = [SecretMatch(kind, m.start(), m.end()) for kind, pattern in _SHAPED for m in pattern.finditer(text)]
    found += _checked_numbers(text)
    found += [SecretMatch("bearer_token", *m.span("value")) for m in _BEARER.finditer(text)]
    found += [
        SecretMatch("url_credentials", *m.span("value"))
        for m in _URL_CREDENTIALS.finditer(text)
        if REDACTED not in m.group("value")
    ]
    found += _password_matches(text)
    found += [
        SecretMatch("generic_secret", *m.span("value"))
        for m in _ASSIGNMENT.finditer(text)
        if _looks_random(m.group("value"))
    ]
    # A value pattern that allows "." would take the full stop ending the sentence with it.
    found = [_without_trailing_stop(text, match) for match in found]
    found.sort(key=lambda s: (s.start, -s.end))
    merged: list[SecretMatch] = []
    for match in found:
        if merged and match.start < merged[-1].end:
            # Overlapping matches are merged, not dropped: every matched character is covered.
            last = merged[-1]
            merged[-1] = SecretMatch(last.kind, last.start, max(last.end, match.end))
        else:
            merged.append(match)
    return merged


def _without_trailing_stop(text: str, match: SecretMatch) -> SecretMatch:
    end = match.end
    while end - 1 > match.start and text[end - 1] in ".,;:!?)" and match.kind != "private_key":
        end -= 1
    return match if end == match.end else SecretMatch(match.kind, match.start, end)


def redact(text: str) -> tuple[str, int]:
    """Replace every secret in ``text`` with ``[REDACTED]``; return the new text and the count."""
    count = 0
    # A replacement can expose a new token boundary ("-xoxb-..." becomes "]xoxb-..."), so
    # repeat until nothing matches; in practice the second pass finds nothing.
    for _ in range(_MAX_PASSES):
        matches = find_secrets(text)
        if not matches:
            break
        for match in reversed(matches):
            text = text[: match.start] + REDACTED + text[match.end :]
        count += len(matches)
    return text, count


def is_mostly_secret(text: str) -> bool:
    """True when the point of ``text`` is a secret, so redacting it would leave nothing to keep.

    That is: secrets make up at least half of the non-space characters, or fewer than three
    words remain once the secrets and the vocabulary that merely announces them ("the",
    "password", "is", "my"...) are set aside.
    """
    matches = find_secrets(text)
    if not matches:
        return False
    secret_chars = sum(len(text[m.start : m.end].replace(" ", "")) for m in matches)
    if secret_chars * 2 >= len("".join(text.split())):
        return True
    rest = redact(text)[0].replace(REDACTED, " ")
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9'-]+", rest) if w.lower() not in _ANNOUNCING]
    return len(words) < 3


_ANNOUNCING = word_set(
    """the a an is are was my our your user user's team's their its it this that here use with for and
    key keys token tokens password passwords passwd pwd secret secrets api apikey access credential
    credentials login auth bearer authorization value string connection url uri"""
)


def _password_matches(text: str) -> list[SecretMatch]:
    matches = []
    for m in _PASSWORD.finditer(text):
        group = next(name for name in ("dq", "sq", "bare") if m.group(name) is not None)
        value = m.group(group)
        if group == "bare":
            value = value.rstrip(".)!?:")
            prose_separator = m.group("sep").lower() in {"is", "was"}
            if not value or (prose_separator and _is_prose_word(value)):
                continue
        if REDACTED in value:
            continue  # already redacted: the marker is not a password
        start = m.start(group)
        matches.append(SecretMatch("password", start, start + len(value)))
    return matches


def _is_prose_word(value: str) -> bool:
    lowered = value.lower()
    if lowered.isdigit() and len(lowered) < 4:
        # "the password is 12 characters long" states a length, not a password.
        return True
    return lowered in _PROSE_WORDS or (lowered.isalpha() and lowered.endswith(_PROSE_SUFFIXES))


def _looks_random(value: str) -> bool:
    """A long value with the character variety of a generated credential, not a word or id."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and _entropy(value) >= 3.0


def _entropy(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def redact_json(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, scalars) with every string redacted; keys are kept.

    Iterative, so a deeply nested document cannot exhaust the stack. Returns ``value`` itself
    when nothing needed redacting.
    """
    if isinstance(value, str):
        return redact(value)[0]
    if not isinstance(value, dict | list) or not _has_secret(value):
        return value
    copy = json.loads(json.dumps(value))
    stack: list[Any] = [copy]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in list(items):
            if isinstance(item, str):
                node[key] = redact(item)[0]
            elif isinstance(item, dict | list):
                stack.append(item)
    return copy


def _has_secret(value: dict[str, Any] | list[Any]) -> bool:
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        for item in node.values() if isinstance(node, dict) else node:
            if isinstance(item, str):
                if find_secrets(item):
                    return True
            elif isinstance(item, dict | list):
                stack.append(item)
    return False

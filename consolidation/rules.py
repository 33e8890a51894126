"""Whether two memories of one end user say the same thing, replace one another, or both stand.

Pure text and arithmetic, no database: ``reader.read`` turns a memory's content into a
``reader.Reading`` (whom it is about, the single-valued slot it fills, the values and names it
holds, its remaining words, whether it negates or announces a change), and :func:`judge` weighs
two readings and the cosine of their vectors into a :class:`Verdict`:

- ``merge``: the same fact said twice ("The user is based in Lisbon" / "The user lives in
  Lisbon"): same person, same names, numbers and values, the same words up to one, and vectors
  close enough;
- ``supersede``: the newer one replaces the older ("Uses black to format Python" / "Formats Python
  with ruff now"): the same single-valued slot with another value (capture's slot reading and
  value kinds, ``capture/changes.py``), a value of the same kind swapped on the same topic while
  the newer one says something changed, or the older statement negated ("no longer");
- ``keep``: anything else, and every doubt. Two sisters, a preference and a refinement of it
  ("Likes tea" / "Likes green tea in the morning"), another person's fact ("The user's son plays
  guitar") are kept: a wrong merge loses a fact, so the rules lean to keeping.

The thresholds were set on the ``dev`` half of ``evaluation/data/consolidation/pairs.jsonl`` only
(docs/adr/0095-consolidation-measured.md); ``manage.py eval_consolidation`` measures both halves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from capture.text import word_set
from consolidation.reader import Reading

Action = Literal["merge", "supersede", "keep"]

# A pair is judged at all only from this cosine up (below it, two memories of one user are about
# different things even when a slot says otherwise: "lives in Lisbon" / "moved to Berlin" 0.46).
CANDIDATE_MIN_COSINE = 0.30
# Merging needs vectors this close, and the words to match but for one on one side (a word
# swapped on both sides is another fact however close the vectors: "for the data team" /
# "for the infra team", "on Monday mornings" / "on Monday evenings" are at cosine 0.87-0.98).
MERGE_MIN_COSINE = 0.72
# A verdict below this confidence is not acted on at all (not even proposed).
MIN_CONFIDENCE = 0.70


@dataclass(frozen=True)
class Verdict:
    action: Action
    confidence: float
    reason: str


KEEP = Verdict("keep", 0.0, "")


def _values_differ(older: Reading, newer: Reading) -> list[str]:
    """The kinds both hold a value of, with no value in common."""
    return [kind for kind in older.values.keys() & newer.values.keys() if not older.values[kind] & newer.values[kind]]


def judge(older: Reading, newer: Reading, cosine: float) -> Verdict:
    """What to do with two memories of one user (``older`` written first); see the module docstring."""
    if cosine < CANDIDATE_MIN_COSINE or older.subject != newer.subject:
        return KEEP
    verdict = _supersede(older, newer, cosine)
    if verdict.action == "keep":
        verdict = _merge(older, newer, cosine)
    return verdict if verdict.confidence >= MIN_CONFIDENCE else KEEP


def _supersede(older: Reading, newer: Reading, cosine: float) -> Verdict:
    extra_old, extra_new = older.words - newer.words, newer.words - older.words
    # One slot, two values: a person lives in one place, has one timezone, one partner.
    if older.slot and older.slot == newer.slot and older.slot_value and newer.slot_value:
        if older.slot_value != newer.slot_value:
            confidence = 0.92 if newer.changed else 0.86
            return Verdict("supersede", confidence, f"{older.slot}: {older.slot_value} -> {newer.slot_value}")
        return KEEP
    swapped = _values_differ(older, newer)
    other_kinds = (older.values.keys() ^ newer.values.keys()) - {"count"}
    topic_matches = len(extra_old) + len(extra_new) <= 1 and not other_kinds
    if swapped and topic_matches and older.names == newer.names:
        kind = swapped[0]
        said = f"{kind}: {', '.join(sorted(older.values[kind]))} -> {', '.join(sorted(newer.values[kind]))}"
        if newer.rejected & older.values[kind]:
            return Verdict("supersede", 0.95, f"{said} (the newer one names the old value)")
        if newer.changed:
            return Verdict("supersede", 0.88, said)
        return KEEP
    # "The user no longer drinks coffee": the older statement, negated, with a change announced.
    if newer.negated != older.negated and newer.changed and older.names == newer.names and not swapped:
        negated, plain = (newer, older) if newer.negated else (older, newer)
        if negated.words and negated.words <= plain.words and len(plain.words - negated.words) <= 1:
            return Verdict("supersede", 0.85, "the newer statement reverses the older one")
    # "training for a half marathon" -> "now training for a full marathon": one word swapped.
    if (
        newer.changed
        and len(extra_old) == 1
        and len(extra_new) == 1
        and older.names == newer.names
        and older.values == newer.values
        and older.negated == newer.negated
        and len(older.words & newer.words) >= 2
        and cosine >= 0.6
    ):
        return Verdict("supersede", 0.75, f"{next(iter(extra_old))} -> {next(iter(extra_new))}")
    return KEEP


_PREPOSITIONS = word_set("in on at for with during before after when while near from inside outside under")
_DETERMINERS = word_set("the a an their his her my our every all each some any this that")


def _qualifies(reading: Reading, word: str, shared: frozenset[str]) -> bool:
    """Whether ``word`` (a stem) narrows the statement: it stands right before a word both
    statements have ("green tea") or inside a phrase of place, time or purpose ("in the terminal")."""
    tokens = reading.sequence
    for index, (_, stemmed) in enumerate(tokens):
        if stemmed != word:
            continue
        if index + 1 < len(tokens) and tokens[index + 1][1] in shared:
            return True
        back = index - 1
        while back >= 0 and tokens[back][0] in _DETERMINERS:
            back -= 1
        if back >= 0 and tokens[back][0] in _PREPOSITIONS:
            return True
    return False


def _merge(older: Reading, newer: Reading, cosine: float) -> Verdict:
    if older.names != newer.names or older.values != newer.values or older.negated != newer.negated:
        return KEEP
    if older.rejected != newer.rejected or (older.slot == newer.slot and older.slot_value != newer.slot_value):
        return KEEP
    extra_old, extra_new = older.words - newer.words, newer.words - older.words
    if len(extra_old) + len(extra_new) <= 1 and cosine >= MERGE_MIN_COSINE:
        # One side saying one thing more is a rewording ("works as a backend engineer" / "is a
        # backend engineer"), unless that word narrows what it is about: "likes green tea",
        # "prefers dark mode in the terminal" are other facts than "likes tea", "prefers dark mode".
        longer, extra = (older, extra_old) if extra_old else (newer, extra_new)
        if extra and _qualifies(longer, next(iter(extra)), older.words & newer.words):
            return KEEP
        return Verdict("merge", round(min(0.97, 0.55 + 0.45 * cosine), 3), "the same fact in other words")
    return KEEP

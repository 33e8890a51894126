"""The optional LLM judge of the pairs the rules cannot tell apart (docs/adr/0093-consolidation.md).

With an LLM configured (``retrieval.llm``), a run asks it about the close pairs the rules kept
without a reason to: about the same person, with the same names and values, at cosine 0.70 or more
("The user is lactose intolerant" / "The user cannot digest lactose"). It answers ``merge``,
``supersede`` or ``keep_both`` per pair; its merges and supersedes carry confidence 0.75, so under
the ``confidence`` policy (threshold 0.8 by default) a reviewer sees them first. At most
``MAX_PAIRS`` pairs a run, in batches of ``BATCH``; a failed or unusable answer keeps the pairs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from consolidation import reader, rules
from retrieval.llm import LLMError, complete, llm_configured

log = logging.getLogger(__name__)

HARD_MIN_COSINE = 0.70
MAX_PAIRS = 40
BATCH = 20
CONFIDENCE = 0.75
DECISIONS = ("merge", "supersede", "keep_both")

PROMPT = """You maintain the long-term memory of one person. Each numbered pair holds two memories
about them; "older" was stored before "newer". For each pair decide:
- "merge": both say the same fact in other words (nothing would be lost keeping one);
- "supersede": both describe one thing that has only one value at a time, and the newer one
  replaces the older (a change of mind, a move, a new job, a new tool);
- "keep_both": they are different facts, or one adds detail the other lacks, or they are about
  different people or things, or you are unsure.
Prefer keep_both when in doubt: a wrong merge loses a fact.
Answer JSON only: {"verdicts": [{"pair": <number>, "decision": "merge" | "supersede" | "keep_both"}]}"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"pair": {"type": "integer"}, "decision": {"type": "string", "enum": list(DECISIONS)}},
                "required": ["pair", "decision"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}


def enabled() -> bool:
    return llm_configured()


def is_hard(older: reader.Reading, newer: reader.Reading, cosine: float, verdict: rules.Verdict) -> bool:
    """A pair the rules kept without a reason to: same subject, names and values, vectors close."""
    return (
        verdict.action == "keep"
        and cosine >= HARD_MIN_COSINE
        and older.subject == newer.subject
        and older.names == newer.names
        and older.values == newer.values
    )


def decide(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """The LLM's decision per ``(older, newer)`` pair, in order ("keep_both" where it gave none)."""
    decisions = ["keep_both"] * len(pairs)
    for start in range(0, min(len(pairs), MAX_PAIRS), BATCH):
        batch = pairs[start : start + BATCH]
        listed = "\n".join(
            f"{n}. older: {json.dumps(older)}\n   newer: {json.dumps(newer)}"
            for n, (older, newer) in enumerate(batch, 1)
        )
        try:
            reply = complete(
                [{"role": "system", "content": PROMPT}, {"role": "user", "content": listed}],
                model=settings.MEMORYHUB_LLM_MODEL,
                timeout=settings.MEMORYHUB_CAPTURE_LLM_TIMEOUT,
                max_tokens=40 * len(batch) + 50,
                json_schema=SCHEMA,
                schema_name="verdicts",
            )
            verdicts = json.loads(reply)["verdicts"]
        except (LLMError, ValueError, KeyError, TypeError) as error:
            log.warning("consolidation's LLM judge gave no usable answer; the pairs stay kept: %s", error)
            continue
        for verdict in verdicts if isinstance(verdicts, list) else []:
            if not isinstance(verdict, dict):
                continue
            number, decision = verdict.get("pair"), verdict.get("decision")
            if isinstance(number, int) and 1 <= number <= len(batch) and decision in DECISIONS:
                decisions[start + number - 1] = decision
    return decisions

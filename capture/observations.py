"""Findings, insights and lessons (FIL) from the output of an agent's step.

Two paths share the same output shape: a rule-based extractor (no LLM needed) and the
messages + tolerant parser for an LLM. Every observation becomes a ``ProposedMemory`` with
category ``finding`` / ``insight`` / ``lesson``, kind ``note`` and scope ``user``.

Kind is ``note`` for all three, lessons included: a lesson is the agent's advice to itself,
not a decision somebody made, and the category already says which of the three it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from capture.classifier import ClassifierOutputError, iter_json_values, load_prompt
from capture.proposals import MAX_CONTENT_CHARS, ProposedMemory
from capture.text import clip, finish_sentence, is_specific, iter_lines, lower_first, split_sentences
from common.redaction import is_mostly_secret, redact

MIN_OUTPUT_CHARS = 50
MAX_OUTPUT_CHARS = 4000
MAX_OBSERVATIONS = 12
_MAX_RULE_SENTENCE_CHARS = 400
_MIN_WORDS = 4

_SECTION = re.compile(
    r"^#*\s*(?:key\s+)?(?P<label>findings?|observations?|insights?|conclusions?|analysis|lessons?(?: learned)?|"
    r"recommendations?|takeaways?|next time)\s*:?\s*$",
    re.IGNORECASE,
)
_INLINE_LABEL = re.compile(r"^(?P<label>finding|insight|conclusion|lesson|recommendation|takeaway)s?\s*:\s*", re.I)
_LABELS = {"find": "finding", "obse": "finding", "insi": "insight", "conc": "insight", "anal": "insight"}
_LESSON = re.compile(
    r"^(?:always|never|avoid|prefer|don't|do not|make sure|remember to|be sure to|next time|in the future|"
    r"going forward|ensure|lesson)\b|\b(?:should|shouldn't|must|need to|needs to|next time|in the future|"
    r"going forward|lessons? learned|better to|recommend(?:ed)?|avoid)\b",
    re.IGNORECASE,
)
_INSIGHT = re.compile(
    r"\b(?:because|suggests?|means|likely|probably|indicates?|implies|therefore|thus|hence|which explains|"
    r"due to|seems|appears|root cause|the reason|caused by|in other words|conclude[sd]?)\b",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(?:found|discovered|shows?|showed|shown|returns?|returned|reported|measured|observed|detected|confirmed|"
    r"fails?|failed|errored|timed out|took|takes|contains?|uses|requires|supports|defaults to|is limited to)\b|"
    r"\b\w*(?:Error|Exception)\b|\bHTTP\s*\d{3}\b",
    re.IGNORECASE,
)
_COPULA = re.compile(r"\b(?:is|are|was|were|has|have)\b", re.IGNORECASE)
_NARRATION = re.compile(
    r"^(?:i will|i'll|i'm going to|i am going to|let me|let's|next,? i|now i|here is|here's|below is|"
    r"the following|this (?:step|report|output|summary)|in this step|done|completed|summary|step \d)\b",
    re.IGNORECASE,
)
_AGENT_LEAD = re.compile(
    r"^(?:(?:i|we)\s+(?:found|discovered|noticed|observed|learned|learnt|confirmed|realized|realised)\s+that\s+|"
    r"(?:it\s+)?turns out(?:\s+that)?,?\s+)",
    re.IGNORECASE,
)
_NEEDS_CONTEXT = re.compile(
    r"^(?:it|this|that|these|those|they|them|here|there|i|we|the (?:result|results|output|step|response|call|"
    r"request|command|run))\b",
    re.IGNORECASE,
)
_AGENT_I = re.compile(r"\bI\b")
_SETTINGS = {"finding": (0.5, 0.7), "insight": (0.5, 0.6), "lesson": (0.6, 0.6)}


def prepare_step_output(output: str) -> str | None:
    """The output to extract from: ``None`` under 50 characters; over 4,000 cut at the last
    sentence end (or word boundary) before that."""
    text = output.strip()
    if len(text) < MIN_OUTPUT_CHARS:
        return None
    if len(text) > MAX_OUTPUT_CHARS:
        cut = text[:MAX_OUTPUT_CHARS]
        # End on a whole sentence when one ends in the second half; a half sentence misleads.
        sentence_end = max(cut.rfind(mark) for mark in (". ", "! ", "? ", "\n"))
        if sentence_end > MAX_OUTPUT_CHARS // 2:
            text = cut[: sentence_end + 1].rstrip()
        else:
            text = cut.rsplit(None, 1)[0] if " " in cut or "\n" in cut else cut
    return text


def extract_observations(*, step_name: str, step_type: str, output: str) -> list[ProposedMemory]:
    """Rule-based FIL from a step's output: each sentence or bullet is a finding (an observed
    fact), an insight (an interpretation) or a lesson (advice), or nothing at all.

    A heading such as "Findings:" or "Lessons learned" labels the bullets under it; an inline
    "Lesson: ..." labels its line. Unlabelled sentences are classified by wording, lesson
    first (advice often cites a fact), then insight, then finding.
    """
    text = prepare_step_output(output)
    if text is None:
        return []
    return _proposals(_units(text), step_name=step_name, step_type=step_type)


def _units(text: str) -> Iterator[tuple[str, str, bool]]:
    """``(category, sentence, labelled)`` for each sentence worth keeping."""
    section: str | None = None
    after_blank = False
    for line, is_bullet in iter_lines(text):
        heading = _SECTION.match(line.strip("*_ "))
        if heading:
            section = _label(heading["label"])
        elif line.startswith("#") or (after_blank and line and not is_bullet):
            section = None  # another heading, or a new paragraph, ends a labelled section
        after_blank = not line
        if heading or not line or line.startswith("#"):
            continue
        for sentence in split_sentences(line):
            inline = _INLINE_LABEL.match(sentence)
            label = _label(inline["label"]) if inline else section
            sentence = sentence[inline.end() :] if inline else sentence
            category = None if _NARRATION.match(sentence) else label or _classify(sentence)
            if category and len(sentence) <= _MAX_RULE_SENTENCE_CHARS and len(sentence.split()) >= _MIN_WORDS:
                yield category, sentence, label is not None


def _label(word: str) -> str:
    return _LABELS.get(word.lower()[:4], "lesson")


def _classify(sentence: str) -> str | None:
    if _LESSON.search(sentence):
        return "lesson"
    if _INSIGHT.search(sentence):
        return "insight"
    if _FINDING.search(sentence) or (_COPULA.search(sentence) and is_specific(sentence)):
        return "finding"
    return None


def _proposals(items: Iterator[tuple[str, str, bool]], *, step_name: str, step_type: str) -> list[ProposedMemory]:
    """Turn ``(category, text, labelled)`` into proposals: redacted, self-contained, unique, capped."""
    proposals: list[ProposedMemory] = []
    seen: set[str] = set()
    for category, raw, labelled in items:
        if len(proposals) >= MAX_OBSERVATIONS:
            break
        if is_mostly_secret(raw):
            continue
        clean = redact(raw)[0]
        content = _self_contained(clean, step_name, step_type)
        key = " ".join(content.casefold().split())
        if not content or len(content) > MAX_CONTENT_CHARS or key in seen:
            continue
        seen.add(key)
        importance, confidence = _SETTINGS[category]
        proposals.append(
            ProposedMemory(
                content=content,
                kind="note",
                category=category,
                scope="user",
                importance=importance,
                confidence=round(confidence + 0.1, 2) if labelled else confidence,
                reason=f"{category.capitalize()} from {_step_phrase(step_name, step_type)}.",
                evidence=clip(clean, 200),
            )
        )
    return proposals


def _self_contained(sentence: str, step_name: str, step_type: str) -> str:
    """Drop "I found that"; prefix the step when the sentence leans on context ("it", "this")."""
    text = _AGENT_LEAD.sub("", sentence.strip())
    if _NEEDS_CONTEXT.match(text):
        text = f"During {_step_phrase(step_name, step_type)}, {lower_first(_AGENT_I.sub('the agent', text))}"
    return finish_sentence(text)


def _step_phrase(step_name: str, step_type: str) -> str:
    kind = f"{step_type.strip()} step" if step_type.strip() else "step"
    return f'the {kind} "{step_name.strip()}"' if step_name.strip() else f"an agent {kind}"


# --- LLM path -------------------------------------------------------------------------------

_DATA_TAG = re.compile(r"</?\s*step_output\s*>", re.IGNORECASE)
_FIL_KEYS = {"finding": "finding", "insight": "insight", "lesson": "lesson", "conclusion": "insight"}


def build_observation_messages(step_name: str, step_type: str, output: str) -> list[dict[str, str]]:
    """System + user messages asking an LLM for ``{"findings", "insights", "lessons"}``.

    The output is cut like the rule path's and redacted before it leaves for the model.
    """
    text = redact(prepare_step_output(output) or output.strip())[0]
    text = _DATA_TAG.sub(lambda m: m.group().replace("<", "&lt;").replace(">", "&gt;"), text)
    user = (
        f"STEP: {step_type.strip() or 'unknown type'} {step_name.strip()!r}\n\n"
        f"<step_output>\n{text}\n</step_output>\n\nAnswer with the JSON object only."
    )
    return [{"role": "system", "content": load_prompt("observations")}, {"role": "user", "content": user}]


def parse_observation_output(text: str, *, step_name: str = "", step_type: str = "") -> list[ProposedMemory]:
    """Proposals from the LLM's answer; as tolerant as ``parse_classifier_output``.

    Accepts the object (plural or singular keys, any case), a wrapper around it, or a list of
    ``{"category", "content"}`` objects. Raises ``ClassifierOutputError`` when no usable JSON
    is found; an object with empty lists returns ``[]``.
    """
    for value, _repaired in iter_json_values(text):
        items = _fil_items(value)
        if items is not None:
            labelled = ((category, item, True) for category, item in items)
            return _proposals(labelled, step_name=step_name, step_type=step_type)
    raise ClassifierOutputError("no findings/insights/lessons JSON found in the observation output")


def _fil_items(value: Any) -> list[tuple[str, str]] | None:
    if isinstance(value, list):
        found = []
        for entry in value:
            category = _fil_key(entry.get("category") or entry.get("type")) if isinstance(entry, Mapping) else None
            if category and (content := _item_text(entry)):
                found.append((category, content))
        return found if found or not value else None
    if not isinstance(value, Mapping):
        return None
    items: list[tuple[str, str]] = []
    keys = [(_fil_key(key), entries) for key, entries in value.items()]
    for category, entries in keys:
        for entry in entries if isinstance(entries, list) else [entries]:
            if category and (text := _item_text(entry)):
                items.append((category, text))
    if any(category for category, _ in keys):
        return items
    # A wrapper such as {"observations": {...}}: look one level down.
    inner = [v for v in value.values() if isinstance(v, Mapping | list)]
    return _fil_items(inner[0]) if len(inner) == 1 else None


def _fil_key(key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    word = key.strip().lower().removesuffix(" learned").removesuffix("s")
    return _FIL_KEYS.get(word)


def _item_text(entry: Any) -> str:
    if isinstance(entry, Mapping):
        entry = entry.get("content") or entry.get("text") or ""
    return entry.strip() if isinstance(entry, str) else ""

"""HyDE: ask an LLM for short statements a relevant stored memory might contain.

Conversation text is verbose dialogue while memories are terse third-person statements, so the
two sit apart in embedding space. Embedding a few hypothetical memories written from the
conversation ("The user prefers uv over pip.") finds stored ones far better than the raw window.
This module only builds the chat messages and parses the reply; the LLM call lives behind the
project's LLM seam.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from retrieval.ranking.packing import fence
from retrieval.ranking.tokens import truncate_to_tokens

PROMPT_PATH = Path(__file__).parent / "prompts" / "hyde.md"
MAX_HYPOTHESIS_CHARS = 300
#: The tail of the window kept for the prompt: recent turns matter most, and a flash model
#: answers faster on a short prompt.
DEFAULT_WINDOW_TOKENS = 1500

_FENCE_LINE = re.compile(r"^\s*(?:`{3,}|~{3,})[\w+.-]*\s*$")
_BULLET = re.compile(r"^(?:[-*+–—]\s+|[•‣◦▪●·]\s*)")
# "1." / "2)" / "(3)" / "[4]" / "5:", but not "3.5 million" or "10:30".
_NUMBERING = re.compile(r"^(?:\(\d{1,3}\)|\[\d{1,3}\]|\d{1,3}[.):\]])\s*(?=\D)")
_LABEL = re.compile(
    r"^(?:(?:hypothes[ie]s|hypothetical(?:\s+(?:memory|sentence))?|sentence|memory|statement)"
    r"(?:\s*#?\d{1,3}\s*[:.)\-–—]?|\s*[:\-–—])|h\d{1,3}\s*[:.)])\s+",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(r"^(?:(?:here|below) (?:are|is)\b|(?:sure|certainly|of course|okay|ok)\W*$)", re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "`": "`"}
# Complete string literals that are not object keys, for JSON cut off mid-array.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(?!\s*:)')
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z0-9])")
_LETTER = re.compile(r"[^\W\d_]")


@functools.cache
def _system_template() -> str:
    return PROMPT_PATH.read_text(encoding="utf-8").strip()


def build_hyde_messages(
    window_text: str, *, n: int, max_window_tokens: int = DEFAULT_WINDOW_TOKENS
) -> list[dict[str, str]]:
    """Chat messages (system, user) asking for ``n`` hypothetical memory sentences.

    Only the last ``max_window_tokens`` tokens of the window are sent, fenced as quoted data so
    instructions inside the conversation do not steer the model. Callers skip HyDE for a blank
    window; passing one, or ``n < 1``, is a ``ValueError``.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    window = truncate_to_tokens(window_text.strip(), max_window_tokens, from_end=True)
    if not window.strip():
        raise ValueError("the conversation window is blank")
    system = _system_template().replace("{n}", str(n))
    user = f"Conversation (the latest message is last):\n\n{fence(window)}\n\nWrite {n} sentences."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_hypotheses(text: str, *, n: int) -> list[str]:
    """Up to ``n`` distinct hypothesis sentences from an LLM reply, in reply order.

    Accepts one sentence per line or a JSON array (also inside a code fence, after a preamble,
    or cut off mid-way), and strips numbering, bullets, "Hypothesis 1:" labels, bold markers and
    surrounding quotes. Sentences longer than ``MAX_HYPOTHESIS_CHARS`` are cut at a word
    boundary. A reply with nothing usable gives ``[]``.
    """
    if n < 1 or not text.strip():
        return []
    body = "\n".join(line for line in text.splitlines() if not _FENCE_LINE.match(line)).strip()
    candidates = _json_strings(body)
    if candidates is None:
        candidates = [line for line in body.splitlines() if line.strip()]
        if len(candidates) == 1:
            candidates = _split_paragraph(candidates[0])
    return _distinct(filter(None, map(_clean, candidates)))[:n]


def _json_strings(body: str) -> list[str] | None:
    """The strings of a JSON value in ``body``, or None when ``body`` holds no usable JSON."""
    array = body[body.find("[") : body.rfind("]") + 1]
    for candidate in (body, array):
        try:
            strings = list(_string_leaves(json.loads(candidate)))
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." garbage
            continue
        if strings:
            return strings
    if body.startswith(("[", "{")):
        # Cut off mid-array (a length limit): keep the string literals that did complete.
        return [_unquote(literal) for literal in _JSON_STRING.findall(body)]
    return None


def _split_paragraph(paragraph: str) -> list[str]:
    """Sentences of a reply that ignored "one per line" and wrote a paragraph.

    A piece under three words ("Dr.", "e.g.", "1.") is an abbreviation or a list number
    rather than a sentence, so it is joined to the piece after it.
    """
    sentences: list[str] = []
    pending = ""
    for piece in _SENTENCE_END.split(paragraph):
        pending = f"{pending} {piece}".strip()
        if len(pending.split()) >= 3:
            sentences.append(pending)
            pending = ""
    return [*sentences, pending] if pending else sentences


def _string_leaves(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)


def _clean(line: str) -> str | None:
    """One candidate without list markup, or None when it is not a sentence."""
    # Lone surrogates (from "\ud800" escapes) would break UTF-8 encoding in the embedder.
    text = " ".join(line.replace("**", "").encode("utf-8", "ignore").decode("utf-8").split())
    previous = None
    while text != previous:
        previous = text
        for pattern in (_BULLET, _NUMBERING, _LABEL):
            text = pattern.sub("", text, count=1).strip()
        text = _unquote(text.rstrip(",").strip())
    if not _LETTER.search(text) or text.endswith(":") or _PREAMBLE.match(text):
        return None
    if len(text) > MAX_HYPOTHESIS_CHARS:
        head = text[: MAX_HYPOTHESIS_CHARS + 1]
        # Keep whole words: drop the word the limit falls in, unless the limit ends it.
        cut = head[:-1] if head[-1].isspace() else head.rsplit(None, 1)[0]
        text = cut if len(cut) <= MAX_HYPOTHESIS_CHARS else text[:MAX_HYPOTHESIS_CHARS]
    return text.rstrip()


def _unquote(text: str) -> str:
    """``text`` without one pair of surrounding quotes, JSON escapes decoded."""
    if len(text) < 2 or _QUOTES.get(text[0]) != text[-1]:
        return text
    if text[0] == '"':
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, str):
            return decoded.strip()
    return text[1:-1].strip()


def _distinct(sentences: Iterable[str]) -> list[str]:
    """First occurrence of each sentence, ignoring case, spacing and final punctuation."""
    seen: set[str] = set()
    kept: list[str] = []
    for sentence in sentences:
        key = " ".join(sentence.casefold().split()).rstrip(".!;")
        if key not in seen:
            seen.add(key)
            kept.append(sentence)
    return kept

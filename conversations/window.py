"""The conversation window: the user and assistant text an extractor or retriever looks at.

Rules, in order:

1. **Summary marker.** The window starts *after* the last ``system`` or ``assistant``
   message whose text begins (ignoring case and leading whitespace) with one of
   ``SUMMARY_MARKERS``. What came before was already summarised (and captured by the
   compaction trigger), so it is not looked at again; the summary itself is dropped too.
2. **Roles.** Only ``user`` and ``assistant`` messages are kept (``human``/``ai``/``model``
   are accepted as their aliases). ``tool``, ``function``, ``system`` and ``developer``
   messages are dropped.
3. **Tool content.** ``tool_calls``/``function_call`` payloads are ignored; of list-of-parts
   content only text parts are kept (``tool_use``, ``tool_result``, images are dropped);
   inline tool markup such as ``<tool_call>...</tool_call>`` is cut out of the text.
4. **Empty messages** (after the above) are dropped.
5. **Size.** With ``max_chars``, the newest messages are kept whose contents total at most
   ``max_chars`` characters; the oldest kept message may be cut, keeping its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SUMMARY_MARKERS: tuple[str, ...] = (
    "[summary]",
    "[conversation summary]",
    "summary of the conversation so far",
    "conversation summary:",
    "<summary>",
)

_KEPT_KEYS = ("message_id", "correlation_id", "timestamp")
_ROLE_ALIASES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant"}
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_TOOL_TAGS = "tool_call|tool_calls|tool_use|tool_result|function_call|function_calls|function_results|tool"
_TOOL_MARKUP = re.compile(rf"<({_TOOL_TAGS})\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
# An opening tag with no closing one: the model was cut off mid tool call.
_UNCLOSED_TOOL_MARKUP = re.compile(rf"<(?:{_TOOL_TAGS})\b[^>]*>.*\Z", re.DOTALL | re.IGNORECASE)
_ELLIPSIS = "…"
# A cut fragment shorter than this carries no meaning; leave it out instead.
_MIN_FRAGMENT = 20

ROLE_LABELS = {"user": "User", "assistant": "Assistant"}


def clean_window(messages: Iterable[Mapping[str, Any]], *, max_chars: int | None = None) -> list[dict[str, str]]:
    """Reduce raw chat messages to ``[{"role", "content"}]`` of user and assistant text.

    See the module docstring for the exact rules. Malformed entries (not a mapping, no
    role) are skipped rather than rejected: the window is best-effort context.
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError("max_chars must be positive")
    raw = [m for m in messages if isinstance(m, Mapping)]
    start = _after_last_summary(raw)
    window: list[dict[str, str]] = []
    for message in raw[start:]:
        role = _ROLE_ALIASES.get(str(message.get("role", "")).strip().lower())
        if role is None:
            continue
        text = _strip_tool_markup(_flatten(message.get("content"))).strip()
        if text:
            entry = {"role": role, "content": text}
            # Where the message is stored and when it was said travel with it (provenance, dates).
            entry.update({k: str(message[k]) for k in _KEPT_KEYS if message.get(k)})
            window.append(entry)
    return window if max_chars is None else _fit(window, max_chars)


def render_window(messages: Iterable[Mapping[str, str]]) -> str:
    """Render a cleaned window as ``"User: ...\\nAssistant: ..."``, one message per entry."""
    lines = []
    for message in messages:
        role = message.get("role", "")
        label = ROLE_LABELS.get(role, role.capitalize() or "Unknown")
        when = str(message.get("timestamp") or "")[:16].replace("T", " ")
        lines.append(
            f"{label} [{when}]: {message.get('content', '')}" if when else f"{label}: {message.get('content', '')}"
        )
    return "\n".join(lines)


def is_summary(message: Mapping[str, Any]) -> bool:
    """True when a system or assistant message opens with a summary marker."""
    if str(message.get("role", "")).strip().lower() not in {"system", "assistant", "ai", "model"}:
        return False
    text = _flatten(message.get("content")).lstrip().casefold()
    return text.startswith(SUMMARY_MARKERS)


def _after_last_summary(messages: list[Mapping[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if is_summary(messages[index]):
            return index + 1
    return 0


def _flatten(content: Any) -> str:
    """Text of a message's content: a string, a list of parts, or nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, Mapping)
            and isinstance(part.get("text"), str)
            # Parts without a type are plain text in some SDKs; typed parts must say text.
            and part.get("type", "text") in _TEXT_PART_TYPES
        ):
            texts.append(part["text"])
    return "\n".join(t for t in texts if t.strip())


def _strip_tool_markup(text: str) -> str:
    return _UNCLOSED_TOOL_MARKUP.sub("", _TOOL_MARKUP.sub("", text))


def _fit(window: list[dict[str, str]], max_chars: int) -> list[dict[str, str]]:
    """Keep the newest messages within ``max_chars``; cut the oldest kept one at its start."""
    kept: list[dict[str, str]] = []
    budget = max_chars
    for message in reversed(window):
        content = message["content"]
        if len(content) <= budget:
            kept.append(message)
            budget -= len(content)
            continue
        if budget >= _MIN_FRAGMENT or not kept:
            tail = _tail(content, budget - len(_ELLIPSIS))
            if tail:
                kept.append({"role": message["role"], "content": _ELLIPSIS + tail})
        break
    kept.reverse()
    return kept


def _tail(text: str, size: int) -> str:
    """The last ``size`` characters of ``text`` or fewer, starting at a word when possible."""
    if size < 1:
        return ""
    tail = text[-size:]
    if not text[-size - 1].isspace() and " " in tail:
        tail = tail.split(" ", 1)[1]
    return tail.lstrip()

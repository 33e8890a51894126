"""Transcripts as chat messages (``{role, content}``) for ``POST /capture``.

Accepted: a JSON array of messages or ``{"messages": [...]}``; JSON lines of messages or of
Claude Code's transcript records; or plain ``role: text`` lines, where a line without a
``role:`` prefix continues the message before it.
"""

from __future__ import annotations

import json
import re

# Only for annotations: the hooks import this module, and a context hook does not import typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The API takes a message of up to 32,000 characters; a longer one is cut, not refused.
MAX_MESSAGE_CHARS = 32_000
_ROLE_LINE = re.compile(r"^(?P<role>[A-Za-z][\w-]{0,19}):\s?(?P<text>.*)$")


class TranscriptError(ValueError):
    """The text is none of the accepted shapes."""


def parse(text: str) -> list[dict[str, Any]]:
    """The messages of a transcript in any accepted shape, in order."""
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] in "[{":
        try:
            whole = json.loads(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, list):
            return [_message(item) for item in whole]
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return [_message(item) for item in whole["messages"]]
        if whole is None:
            return jsonl_messages(stripped.splitlines())
    return _role_lines(stripped.splitlines())


def jsonl_messages(lines: list[str]) -> list[dict[str, Any]]:
    """Messages from JSON lines: plain messages, or Claude Code records (text only, no tool
    traffic, no side chains); lines that are neither are skipped."""
    messages = []
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise TranscriptError(f"not a JSON line: {line[:60]!r}") from error
        message = claude_code_message(record) if "message" in record or "type" in record else _message(record)
        if message is not None:
            messages.append(message)
    return messages


def claude_code_message(record: Any) -> dict[str, Any] | None:
    """The user or assistant text of one Claude Code transcript record, or None for anything
    else (tool calls and results, summaries, side-chain agents, meta lines)."""
    if not isinstance(record, dict) or record.get("type") not in ("user", "assistant"):
        return None
    if record.get("isSidechain") or record.get("isMeta"):
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
        )
    if not isinstance(content, str) or not content.strip():
        return None
    return {"role": str(message.get("role") or record["type"]), "content": content[:MAX_MESSAGE_CHARS]}


def _message(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("role"), str) or "content" not in item:
        raise TranscriptError("each message must be an object with a role and a content")
    content = item["content"]
    if isinstance(content, str):
        content = content[:MAX_MESSAGE_CHARS]
    return {"role": item["role"], "content": content}


def _role_lines(lines: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for line in lines:
        match = _ROLE_LINE.match(line)
        if match:
            messages.append({"role": match["role"].lower(), "content": match["text"]})
        elif messages:
            messages[-1]["content"] += "\n" + line
        elif line.strip():
            raise TranscriptError(f"the first line must start with a role (`user: ...`), not {line[:40]!r}")
    for message in messages:
        message["content"] = message["content"].strip()[:MAX_MESSAGE_CHARS]
    return [message for message in messages if message["content"]]

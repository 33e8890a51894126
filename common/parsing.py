"""The API's JSON body parser: what Postgres cannot store is refused before any code runs.

Three things parse as valid JSON and then fail deep inside a write (a 500, or worse, a row
that is stored and then cannot be read): a lone UTF-16 surrogate (``"\\ud800"``), a NUL
character (text and jsonb refuse both), and nesting so deep that serialising it back
recurses past Python's limit. One walk over the parsed body, without recursion, rejects
them all with a 422 naming the problem.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

MAX_DEPTH = 64


class UnstorableBody(ValueError):
    """The body is valid JSON that cannot be stored; the message says why."""


class StorableJSONParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        data = json.loads(request.body)
        check_storable(data)
        return data  # type: ignore[no-any-return]


def check_storable(value: Any) -> None:
    """Raise ``UnstorableBody`` for a surrogate or NUL in any key or string, or nesting past ``MAX_DEPTH``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UnstorableBody(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise UnstorableBody("text contains a NUL character (\\u0000), which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise UnstorableBody(
            "text contains a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid Unicode"
        ) from error

"""The MCP SDK's own client, connected to MemoryHub over streamable HTTP or a stdio subprocess.

Tests are plain functions: each MCP conversation runs in ``anyio.run`` with a script of
calls (the client is async; the database fixtures are not).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.celery_worker import worker_env

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def http_client(url: str, *, key: str, user: str | None = None, mode: str = "auto") -> AsyncIterator[Client]:
    """An MCP session against ``url`` (the live server's ``/mcp/``) with a Bearer key.

    ``mode`` "auto" negotiates the newest protocol (2026-07-28, one POST per request, no
    handshake); "legacy" the initialize handshake of the 2025 revisions.
    """
    headers = {"Authorization": f"Bearer {key}"}
    if user is not None:
        headers["X-MemoryHub-User"] = user
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def stdio_parameters(*args: str) -> StdioServerParameters:
    """``manage.py mcp <args>`` as a subprocess on the test database and Redis."""
    return StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "manage.py"), "mcp", *args], env=worker_env(), cwd=str(ROOT)
    )


@asynccontextmanager
async def stdio_client(*args: str) -> AsyncIterator[Client]:
    async with Client(stdio_parameters(*args), read_timeout_seconds=120) as client:
        yield client


def run(script: Callable[[], Awaitable[T]]) -> T:
    """Run one async MCP conversation from a synchronous test; an error inside it is raised as
    itself, not wrapped in the task groups' exception groups."""
    try:
        return anyio.run(script)
    except BaseExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error from group


def answer(result: Any) -> dict[str, Any]:
    """A tool result's JSON (its structured content, checked against the text content)."""
    assert json.loads(result.content[0].text) == result.structured_content
    return dict(result.structured_content)


def error_code(result: Any) -> str:
    """The API error code of a failed tool call."""
    assert result.is_error, result.structured_content
    return str(answer(result)["error"]["code"])

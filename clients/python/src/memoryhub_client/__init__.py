"""Typed Python client for the MemoryHub HTTP API: ``MemoryHub`` (sync) and ``AsyncMemoryHub``."""

from __future__ import annotations

from importlib import import_module

# Not typing's TYPE_CHECKING: `memoryhub hook` imports this package for every prompt, and typing's
# import alone costs it more than the rest of the package.
TYPE_CHECKING = False

__all__ = [
    "NO_RETRY",
    "AsyncMemoryHub",
    "BadRequest",
    "CaptureJob",
    "Conflict",
    "Consolidation",
    "Episode",
    "History",
    "JobAccepted",
    "Link",
    "Memory",
    "MemoryHub",
    "MemoryHubError",
    "MemoryPage",
    "MemoryWrite",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "Profile",
    "ProfileFact",
    "ProfileVersion",
    "ProfileVersions",
    "QueryMemoryResult",
    "RateLimited",
    "RetrieveResult",
    "RetrievedMemory",
    "RetryPolicy",
    "ScratchpadEntry",
    "ServerError",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
]


if TYPE_CHECKING:
    from typing import Any

    from memoryhub_client._core import NO_RETRY, RetryPolicy
    from memoryhub_client.aio import AsyncMemoryHub
    from memoryhub_client.client import MemoryHub
    from memoryhub_client.errors import (
        BadRequest,
        Conflict,
        MemoryHubError,
        MethodNotAllowed,
        NotFound,
        PayloadTooLarge,
        RateLimited,
        ServerError,
        TransportError,
        Unauthorized,
        Unavailable,
        ValidationError,
    )
    from memoryhub_client.models import (
        CaptureJob,
        Consolidation,
        Episode,
        History,
        JobAccepted,
        Link,
        Memory,
        MemoryPage,
        MemoryWrite,
        Profile,
        ProfileFact,
        ProfileVersion,
        ProfileVersions,
        QueryMemoryResult,
        RetrievedMemory,
        RetrieveResult,
        ScratchpadEntry,
    )

# Where each public name lives. They load on first use: ``memoryhub hook`` starts a process per
# agent event and answers a prompt without the HTTP library the client is built on (its import
# alone is most of a hook's time).
_HOMES = {
    "NO_RETRY": "_core",
    "RetryPolicy": "_core",
    "MemoryHub": "client",
    "AsyncMemoryHub": "aio",
    **dict.fromkeys(
        (
            "BadRequest", "Conflict", "MemoryHubError", "MethodNotAllowed", "NotFound", "PayloadTooLarge",
            "RateLimited", "ServerError", "TransportError", "Unauthorized", "Unavailable", "ValidationError",
        ),
        "errors",
    ),
    **dict.fromkeys(
        (
            "CaptureJob", "Consolidation", "Episode", "History", "JobAccepted", "Link", "Memory", "MemoryPage",
            "MemoryWrite", "Profile", "ProfileFact", "ProfileVersion", "ProfileVersions", "QueryMemoryResult",
            "RetrievedMemory", "RetrieveResult", "ScratchpadEntry",
        ),
        "models",
    ),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"memoryhub_client.{_HOMES[name]}"), name)
    globals()[name] = value
    return value

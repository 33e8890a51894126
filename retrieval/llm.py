"""The one seam between MemoryHub and a chat model (any OpenAI-compatible server).

Nothing outside this module and ``retrieval.embedders`` touches the openai SDK. The SDK is
imported lazily: it costs about a second at import time and most processes (management
commands, a web process without an LLM) never call it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam

DEFAULT_LLM_MODEL = "gpt-4o-mini"

# A placeholder key: local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) need none,
# but the SDK refuses to build a client without one.
_NO_API_KEY = "not-configured"

_clients: dict[tuple[int, str | None, str | None], OpenAI] = {}
_clients_lock = threading.Lock()


class LLMError(Exception):
    """The chat model could not give an answer: timeout, HTTP error, connection error or an empty reply."""


def setting(name: str, default: Any = None) -> Any:
    """Read a Django setting at call time, or ``default`` when Django is not configured.

    Reading lazily keeps these modules importable (and unit-testable) without settings.
    """
    from django.conf import settings

    if not settings.configured:
        return default
    return getattr(settings, name, default)


def llm_configured() -> bool:
    """True when an LLM endpoint or API key is configured (otherwise capture and HyDE fall back)."""
    return bool(setting("MEMORYHUB_LLM_BASE_URL") or setting("OPENAI_API_KEY"))


def openai_client(*, base_url: str | None, api_key: str | None) -> OpenAI:
    """The process's shared SDK client for one endpoint and key.

    Timeouts are passed per request rather than being part of the key: callers pass the time
    left in their budget, and a client per distinct float would leak connection pools. The
    process id is part of the key so a forked worker never reuses its parent's sockets.
    """
    # Settings hold "" for unset values; the SDK needs None to fall back to its default URL.
    base_url, api_key = base_url or None, api_key or None
    key = (os.getpid(), base_url, api_key)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            from openai import OpenAI

            # max_retries=0: Celery is the one retry layer; the SDK must fail fast.
            client = OpenAI(base_url=base_url, api_key=api_key or _NO_API_KEY, max_retries=0)
            _clients[key] = client
        return client


def describe_openai_error(exc: Exception, *, timeout: float) -> str:
    """A one-line account of an SDK failure (or of a body it could not parse), for error messages."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return f"timed out after {timeout:g}s"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not connect: {exc}"
    if isinstance(exc, openai.APIStatusError):
        # The server's own message when it sent one; the SDK's is prefixed "Error code: N - ".
        body = exc.body if isinstance(exc.body, dict) else {}
        return f"HTTP {exc.status_code}: {body.get('message') or exc.message}"
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        return f"malformed response: {exc}"
    return f"{type(exc).__name__}: {exc}"


def complete(
    messages: list[dict[str, str]],
    *,
    model: str | None = None,
    timeout: float,
    max_tokens: int = 512,
    temperature: float = 0.0,
    base_url: str | None = None,
    api_key: str | None = None,
) -> str:
    """Send a chat completion request and return the reply's text.

    ``model``, ``base_url`` and ``api_key`` default to the settings ``MEMORYHUB_LLM_MODEL``,
    ``MEMORYHUB_LLM_BASE_URL`` and ``OPENAI_API_KEY``. Raises LLMError on any failure,
    including a reply without text; it never retries.
    """
    import openai

    model_name = model or setting("MEMORYHUB_LLM_MODEL") or DEFAULT_LLM_MODEL
    client = openai_client(
        base_url=base_url or setting("MEMORYHUB_LLM_BASE_URL"),
        api_key=api_key or setting("OPENAI_API_KEY"),
    )
    try:
        response = client.chat.completions.create(
            model=model_name,
            messages=cast("list[ChatCompletionMessageParam]", messages),
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
        )
    except (openai.OpenAIError, ValueError) as exc:
        # ValueError: the SDK lets a 200 with an unparseable JSON body escape as JSONDecodeError.
        raise LLMError(f"LLM {model_name}: {describe_openai_error(exc, timeout=timeout)}") from exc
    return _reply_text(response, model_name)


def _reply_text(response: object, model_name: str) -> str:
    # Servers that answer 200 with a body the SDK cannot model hand back a str or a dict
    # instead of a ChatCompletion, so read defensively rather than trusting the type.
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise LLMError(f"LLM {model_name}: the reply has no choices")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str) or not content.strip():
        raise LLMError(f"LLM {model_name}: the reply has no text")
    return content

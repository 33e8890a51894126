"""The one seam between MemoryHub and a chat model (any OpenAI-compatible server).

Nothing outside this module and ``retrieval.embedding.openai_embedder`` touches the openai SDK. The SDK is
imported lazily: it costs about a second at import time and most processes (management
commands, a web process without an LLM) never call it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from common import config
from common.per_process import PerProcess

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger(__name__)

DEFAULT_LLM_MODEL = "gpt-4o-mini"

# How a JSON schema is sent, in the order tried on an endpoint not yet seen (see complete()):
# OpenAI, vLLM and Ollama take "json_schema"; llama-cpp-python's server takes "json_object"
# with a "schema" and answers 422 to "json_schema"; "none" sends no response_format at all.
SCHEMA_STYLES = ("json_schema", "json_object", "none")
_schema_styles: dict[str | None, str] = {}

# A placeholder key: local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) need none,
# but the SDK refuses to build a client without one.
_NO_API_KEY = "not-configured"

# This process's clients by (base URL, key): a forked child opens its own, never its parent's sockets.
_clients: PerProcess[dict[tuple[str | None, str | None], OpenAI]] = PerProcess(dict)
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
    return config.llm_configured()


def openai_client(*, base_url: str | None, api_key: str | None) -> OpenAI:
    """The process's shared SDK client for one endpoint and key.

    Timeouts are passed per request rather than being part of the key: callers pass the time
    left in their budget, and a client per distinct float would leak connection pools. A forked
    worker never reuses its parent's clients (``PerProcess``), so never its sockets.
    """
    # Settings hold "" for unset values; the SDK needs None to fall back to its default URL.
    base_url, api_key = base_url or None, api_key or None
    key = (base_url, api_key)
    clients = _clients.get()
    with _clients_lock:
        client = clients.get(key)
        if client is None:
            from openai import OpenAI

            # max_retries=0: Celery is the one retry layer; the SDK must fail fast.
            client = OpenAI(base_url=base_url, api_key=api_key or _NO_API_KEY, max_retries=0)
            clients[key] = client
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
    json_schema: Mapping[str, Any] | None = None,
    schema_name: str = "output",
) -> str:
    """Send a chat completion request and return the reply's text.

    ``model``, ``base_url`` and ``api_key`` default to the settings ``MEMORYHUB_LLM_MODEL``,
    ``MEMORYHUB_LLM_BASE_URL`` and ``OPENAI_API_KEY``. Raises LLMError on any failure,
    including a reply without text; it never retries.

    With ``json_schema`` the reply is constrained to that schema where the server can do it
    (a top-level object, as OpenAI requires). Servers spell it differently, so the first call
    to an endpoint tries ``SCHEMA_STYLES`` in order, moving on only when the server refuses
    the ``response_format`` itself (an HTTP 400/422/500 naming it), and the process remembers the
    style that was accepted. The caller still validates the reply: a server that ignores the
    schema answers free text.
    """
    model_name = model or setting("MEMORYHUB_LLM_MODEL") or DEFAULT_LLM_MODEL
    endpoint = base_url or setting("MEMORYHUB_LLM_BASE_URL") or None
    client = openai_client(base_url=endpoint, api_key=api_key or setting("OPENAI_API_KEY"))
    request = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    if json_schema is None:
        return _chat(client, model_name, request, timeout=timeout, response_format=None)
    deadline = time.monotonic() + timeout
    known = _schema_styles.get(endpoint)
    for style in (known,) if known else SCHEMA_STYLES:
        response_format = schema_response_format(style, json_schema, schema_name)
        left = max(deadline - time.monotonic(), 0.001)
        try:
            text = _chat(client, model_name, request, timeout=left, response_format=response_format, budget=timeout)
        except _FormatRefused as refused:
            first_line = str(refused).splitlines()[0]
            log.info("LLM endpoint %s refuses response_format %r (%s); trying the next", endpoint, style, first_line)
            continue
        _schema_styles[endpoint] = style
        return text
    # Only a remembered style can end here ("none" is never refused): learn again next time.
    _schema_styles.pop(endpoint, None)
    raise LLMError(f"LLM {model_name}: the server now refuses the {known} response format it accepted before")


def schema_response_format(style: str, schema: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The ``response_format`` body of one of ``SCHEMA_STYLES`` for ``schema``."""
    if style == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": False}}
    if style == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    if style == "none":
        return None
    raise ValueError(f"unknown schema style {style!r}")


class _FormatRefused(LLMError):
    """The server refused the request's ``response_format`` (not the request as a whole)."""


def _chat(
    client: OpenAI,
    model_name: str,
    request: Mapping[str, Any],
    *,
    timeout: float,
    response_format: dict[str, Any] | None,
    budget: float | None = None,
) -> str:
    """One request; errors name ``budget`` (the caller's whole timeout) when given."""
    import openai

    extra: dict[str, Any] = {} if response_format is None else {"response_format": response_format}
    try:
        response = client.chat.completions.create(
            model=model_name,
            messages=cast("list[ChatCompletionMessageParam]", request["messages"]),
            max_tokens=request["max_tokens"],
            temperature=request["temperature"],
            timeout=timeout,
            **extra,
        )
    except (openai.OpenAIError, ValueError) as exc:
        # ValueError: the SDK lets a 200 with an unparseable JSON body escape as JSONDecodeError.
        message = f"LLM {model_name}: {describe_openai_error(exc, timeout=budget or timeout)}"
        if response_format is not None and _refuses_format(exc):
            raise _FormatRefused(message) from exc
        raise LLMError(message) from exc
    return _reply_text(response, model_name)


def _refuses_format(exc: Exception) -> bool:
    """True for a 400/422/500 whose message names the response format.

    llama-cpp-python 0.3.36 answers a ``json_schema`` response format with a 500 whose message
    is the validation error ("loc": "response_format", "type"); others answer 400 or 422.
    """
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422, 500):
        return False
    said = f"{exc.message} {exc.body}".lower()
    return "response_format" in said or "json_schema" in said


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

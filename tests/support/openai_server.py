"""A real OpenAI-compatible HTTP server on loopback, for tests of the LLM and embedding seams.

Tests talk to it through the real openai SDK over real sockets, so timeouts, status codes
and malformed bodies exercise the same code paths as a production endpoint. Replies are
scripted per endpoint (a queue consumed one request at a time) with a deterministic default.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Fault:
    """How to misbehave on one request. Fields combine: ``delay`` runs first, then the rest."""

    status: int | None = None
    delay: float = 0.0
    body: str | None = None
    wrong_dimension: bool = False
    empty: bool = False


ChatReply = str | Fault
EmbeddingsReply = Fault | None


def hashed_bag_of_words(text: str, dimension: int) -> list[float]:
    """A unit vector where each lower-cased word adds +-1 to one hashed slot.

    Texts sharing words get a positive cosine, so retrieval tests can reason about ranking
    without a model. Uses sha256, not ``hash()``, so vectors are stable across processes.
    """
    vector = np.zeros(dimension, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        slot = int.from_bytes(digest[:4], "little") % dimension
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        vector[0], norm = 1.0, 1.0  # a real API never returns a zero vector, even for ""
    return [float(x) for x in vector / norm]


def _echo_last_user_message(messages: list[dict[str, Any]]) -> str:
    user_texts = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    return f"echo: {user_texts[-1] if user_texts else ''}"


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 with scripted chat replies and embeddings."""

    def __init__(
        self, *, dimension: int = 64, api_key: str | None = None, response_formats: tuple[str, ...] | None = None
    ) -> None:
        self.dimension = dimension
        self.api_key = api_key  # when set, other bearer tokens get a 401
        # When set, a chat request whose response_format type is not listed is refused the way
        # llama-cpp-python 0.3.36 refuses "json_schema": HTTP 500 naming response_format.
        self.response_formats = response_formats
        self.default_chat: Callable[[list[dict[str, Any]]], str] | str = _echo_last_user_message
        self.embed_text: Callable[[str, int], list[float]] = hashed_bag_of_words
        self._lock = threading.Lock()
        self._calls: list[tuple[str, Any]] = []
        self._chat_script: deque[ChatReply] = deque()
        self._embeddings_script: deque[EmbeddingsReply] = deque()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Bind a free loopback port and serve from a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        # A short poll interval makes stop() (and so every test's teardown) take ~50 ms, not 500.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; requests still sleeping in a ``Fault(delay=...)`` wake up and end."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK, ending in ``/v1``."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # -- scripting and inspection -------------------------------------------------------

    def script_chat(self, *replies: ChatReply) -> None:
        """Queue replies for the next chat requests: a string is the content, a Fault misbehaves."""
        with self._lock:
            self._chat_script.extend(replies)

    def script_embeddings(self, *faults: EmbeddingsReply) -> None:
        """Queue behaviours for the next embedding requests; None answers normally."""
        with self._lock:
            self._embeddings_script.extend(faults)

    @property
    def calls(self) -> list[tuple[str, Any]]:
        """A copy of every request so far, as (path, parsed JSON body or None)."""
        with self._lock:
            return list(self._calls)

    def count(self, path_suffix: str) -> int:
        """How many requests went to a path ending with ``path_suffix`` (e.g. "/embeddings")."""
        with self._lock:
            return sum(1 for path, _ in self._calls if path.endswith(path_suffix))

    def reset(self) -> None:
        """Forget recorded calls and any replies still queued."""
        with self._lock:
            self._calls.clear()
            self._chat_script.clear()
            self._embeddings_script.clear()

    # -- used by the request handler ----------------------------------------------------

    def _record(self, path: str, body: Any) -> None:
        with self._lock:
            self._calls.append((path, body))

    def _next_chat(self) -> ChatReply | None:
        with self._lock:
            return self._chat_script.popleft() if self._chat_script else None

    def _next_embeddings(self) -> EmbeddingsReply:
        with self._lock:
            return self._embeddings_script.popleft() if self._embeddings_script else None

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _chat_content(self, messages: list[dict[str, Any]]) -> str:
        reply = self.default_chat
        return reply if isinstance(reply, str) else reply(messages)


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_fake = fake

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API; every reply sets Content-Length
    server_fake: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    def do_GET(self) -> None:
        self.server_fake._record(self.path, None)
        if self.path.rstrip("/") != MODELS_PATH:
            return self._send_error(404, f"no route for GET {self.path}")
        models = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in _MODEL_IDS]
        self._send_json(200, {"object": "list", "data": models})

    def do_POST(self) -> None:
        body = self._read_json()
        self.server_fake._record(self.path, body)
        if self._refuse_key():
            return
        if not isinstance(body, dict):
            return self._send_error(400, "the body must be a JSON object")
        try:
            if self.path == CHAT_PATH:
                if self._refuse_format(body):  # before taking a scripted reply: a refusal uses none
                    return None
                return self._chat(body, self.server_fake._next_chat())
            if self.path == EMBEDDINGS_PATH:
                return self._embeddings(body, self.server_fake._next_embeddings())
        except Exception as exc:  # a broken default_chat/embed_text in a test: say so, don't hang up
            return self._send_error(500, f"FakeOpenAI failed: {type(exc).__name__}: {exc}")
        self._send_error(404, f"no route for POST {self.path}")

    def _refuse_format(self, body: dict[str, Any]) -> bool:
        accepted = self.server_fake.response_formats
        requested = body.get("response_format")
        if accepted is None or not isinstance(requested, dict) or requested.get("type") in accepted:
            return False
        expected = " or ".join(repr(t) for t in accepted)
        detail = f"{{'loc': ('body', 'response_format', 'type'), 'msg': 'Input should be {expected}'}}"
        self._send_error(500, f"1 validation error:\n  {detail}", error_type="internal_server_error")
        return True

    def _chat(self, body: dict[str, Any], reply: ChatReply | None) -> None:
        if isinstance(reply, Fault) and self._apply_fault(reply):
            return
        messages = body.get("messages") or []
        content = reply if isinstance(reply, str) else self.server_fake._chat_content(messages)
        choices = [] if isinstance(reply, Fault) and reply.empty else [_choice(content)]
        self._send_json(200, _completion(str(body.get("model", "fake-chat")), choices, messages, content))

    def _embeddings(self, body: dict[str, Any], fault: EmbeddingsReply) -> None:
        if fault is not None and self._apply_fault(fault):
            return
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return self._send_error(400, "input must be a string or a list of strings")
        dimension = self.server_fake.dimension + (1 if fault is not None and fault.wrong_dimension else 0)
        vectors = (
            [] if fault is not None and fault.empty else [self.server_fake.embed_text(t, dimension) for t in texts]
        )
        as_base64 = body.get("encoding_format") == "base64"
        self._send_json(200, _embedding_list(str(body.get("model", "fake-embed")), vectors, texts, as_base64))

    def _apply_fault(self, fault: Fault) -> bool:
        """Sleep and/or answer with the fault; True when the reply has been sent."""
        if fault.delay:
            self.server_fake._sleep(fault.delay)
        if fault.status is not None:
            self._send_error(fault.status, f"scripted fault: HTTP {fault.status}")
            return True
        if fault.body is not None:
            self._send_raw(200, fault.body.encode(), "application/json")
            return True
        return False

    def _refuse_key(self) -> bool:
        expected = self.server_fake.api_key
        if expected is None or self.headers.get("Authorization") == f"Bearer {expected}":
            return False
        self._send_error(401, "Incorrect API key provided", error_type="invalid_request_error")
        return True

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return None

    def _send_error(self, status: int, message: str, *, error_type: str = "server_error") -> None:
        self._send_json(status, {"error": {"message": message, "type": error_type, "param": None, "code": None}})

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json")

    def _send_raw(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing left to tell it


_MODEL_IDS = ("fake-chat", "fake-embed")


def _choice(content: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}


def _completion(model: str, choices: list[dict[str, Any]], messages: Iterable[Any], content: str) -> dict[str, Any]:
    prompt_tokens = sum(len(_WORD.findall(str(m.get("content", "")))) for m in messages if isinstance(m, dict))
    completion_tokens = len(_WORD.findall(content)) if choices else 0
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _embedding_list(model: str, vectors: list[list[float]], texts: list[str], as_base64: bool) -> dict[str, Any]:
    def encode(vector: list[float]) -> list[float] | str:
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode() if as_base64 else vector

    data = [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)]
    tokens = sum(len(_WORD.findall(t)) for t in texts)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

"""Retrieves take turns on a web worker: one at a time, in the order they arrived.

A gunicorn worker is one process with one GIL and several request threads. Two retrieves that
arrive at once used to share it, each slowed by the other, and both finished late. Taking turns,
the first one answers at full speed and the second starts after it. Their mean latency is no worse
and the tail is shorter: retrieves cost about the same, and with such jobs, first come, first
served beats sharing. Measured at 100k memories with 4 clients on 2 cores
(docs/adr/0042-retrieve-turns.md), fourteen rounds of 600 requests each way, alternating (medians of the rounds):
- p95 44.15 → 41.7 ms;
- p99 50.0 → 46.55 ms;
- p50 and throughput the same within the noise (31.55 → 31.95 ms; 122.7 → 120.7 requests/s).
One thread per worker gained about as much in an earlier run of rounds (p95 median 38.5 against
42.3), but then a request waiting on anything would hold its whole worker.

What takes turns: the retrieve endpoints (``TURN_PATHS``), from before authentication to the
response. Their bodies are read before they queue, so a slow client does not hold the turn.
Everything else (captures, the UI, the health check) runs beside them as before.

What gives the turn away: a wait on something other than this machine's CPU. That is an LLM call
(``retrieval.llm.complete``: HyDE, the judge) or a remote embedder's request. It runs in
``waiting_elsewhere()``: the next retrieve in line takes the turn, and the waiting one queues again
after.

When: ``MEMORYHUB_RETRIEVE_TURNS``. ``on`` and ``off`` decide outright. ``auto``, the default, takes
turns only when a retrieve is all work on this machine, which is how ``make run`` serves by
default:
- the database and Redis are Unix sockets or loopback addresses, because their round trips keep
  the turn, and across a network the worker would idle holding it;
- no LLM is configured, so HyDE and the judge cannot run;
- the embedder is local.
With HyDE answering from a loopback LLM after 100 ms, turns made 8 clients slower: p50 170 → 200 ms,
throughput 46 → 39 requests/s. A retrieve then does its CPU work in two parts and embeds four texts,
and while one request's embedding runs outside the GIL, another's Python no longer runs beside it.
At 4 clients it was the same either way.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase

from common.config import llm_configured
from common.per_process import PerProcess

TURN_PATHS = frozenset({"/api/v1/retrieve", "/api/v1/tools/query_memory"})


class Turns:
    """First come, first served among one process's threads; re-entrant for the thread that holds it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._line: deque[object] = deque()
        self._holder: int | None = None
        self._depth = 0  # nested turns the holder has entered inside its own

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this thread's turn (at once when it holds it already) and hold it for the block."""
        me = threading.get_ident()
        with self._changed:
            nested = self._holder == me
            if nested:
                self._depth += 1
            else:
                self._wait_for_turn(me, depth=0)
        try:
            yield
        finally:
            with self._changed:
                if nested:
                    self._depth -= 1
                else:
                    self._hand_on()

    @contextmanager
    def elsewhere(self) -> Iterator[None]:
        """For a wait that does not need this process: the next in line takes the turn meanwhile, and
        this thread queues again at the end (nothing changes for a thread not holding a turn)."""
        me = threading.get_ident()
        with self._changed:
            held = self._depth if self._holder == me else None
            if held is not None:
                self._hand_on()
        try:
            yield
        finally:
            if held is not None:
                with self._changed:
                    self._wait_for_turn(me, depth=held)

    def waiting(self) -> int:
        """Threads in line for a turn (tests, diagnostics)."""
        with self._changed:
            return len(self._line)

    def _wait_for_turn(self, me: int, *, depth: int) -> None:
        # Called holding the condition's lock.
        ticket = object()
        self._line.append(ticket)
        try:
            while self._holder is not None or self._line[0] is not ticket:
                self._changed.wait()
        except BaseException:
            self._line.remove(ticket)
            self._changed.notify_all()
            raise
        self._line.popleft()
        self._holder, self._depth = me, depth

    def _hand_on(self) -> None:
        # Called holding the condition's lock.
        self._holder, self._depth = None, 0
        self._changed.notify_all()


_turns = PerProcess(Turns)


def process_turns() -> Turns:
    """This process's turns (new after a fork: threads waiting in the parent are not in the child)."""
    return _turns.get()


def waiting_elsewhere() -> Any:
    """Context manager for a wait on the network: gives this thread's turn, if it holds one, away."""
    return process_turns().elsewhere()


def enabled() -> bool:
    """Whether retrieves take turns: ``MEMORYHUB_RETRIEVE_TURNS``, where ``auto`` means a retrieve is all
    work on this machine (its database and Redis here, no LLM, a local embedder)."""
    mode = str(getattr(settings, "MEMORYHUB_RETRIEVE_TURNS", "auto"))
    if mode in ("on", "off"):
        return mode == "on"
    local_embedder = str(getattr(settings, "MEMORYHUB_EMBEDDER", "local")).startswith("local")
    database = str(settings.DATABASES["default"].get("HOST") or "")
    redis = urlsplit(str(getattr(settings, "REDIS_URL", ""))).hostname or ""  # none for a unix:// socket
    return host_is_local(database) and host_is_local(redis) and not llm_configured() and local_embedder


def host_is_local(host: str) -> bool:
    """A Unix socket (libpq's default when no host is named; no host in a ``unix://`` URL) or a
    loopback address."""
    if not host or host.startswith("/") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class TurnsMiddleware:
    """The retrieve endpoints answer one at a time per process, in arrival order. First in
    ``MIDDLEWARE``: a request waiting for its turn is not yet counted as answered
    (``common.inflight``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.enabled = enabled()

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not self.enabled or request.path not in TURN_PATHS:
            return self.get_response(request)
        # Read now: a slow client must not hold the turn while it sends. A body too large is
        # refused by the stack below, in the API's error envelope.
        with contextlib.suppress(RequestDataTooBig):
            request.body  # noqa: B018
        with process_turns().turn():
            return self.get_response(request)

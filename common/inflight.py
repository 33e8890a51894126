"""How many requests the web service is answering right now, across its worker processes.

The local model embeds a question on two cores when the service answers nothing else
(``retrieval.embedders.LocalEmbedder.query_threads``): on a quiet machine the second core is free,
and one question embeds in about 60 % of the time; under load every core is already busy and a
second thread only adds hand-offs (docs/adr/0031-query-threads-when-idle.md).

Under gunicorn the master keeps one counter per worker in shared memory (``SLOTS``): it hands a
worker its slot before forking it and zeroes the slot when the worker exits, so a worker killed
mid-request leaves no phantom request behind. Each worker counts its own requests in its slot
(``InFlightMiddleware``) and reads the sum. Anywhere else (``runserver``, tests, a worker past
the slots) the count is this process's own.

The same slot holds how many client connections each worker has open (``_connections``, kept by
``serving.gunicorn_worker``): a worker takes a new connection only when no other holds fewer.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.http import HttpRequest, HttpResponseBase

SLOTS = 64

_lock = threading.Lock()
_slots: Any = None  # multiprocessing.RawArray("i", SLOTS), made in gunicorn's master
# Per slot: 0 when no worker is taking connections through it (none, or one still starting),
# else 1 + the worker's open client connections.
_connections: Any = None
_slot: int | None = None  # this worker's index in _slots
_own = 0  # this process's requests when it has no slot


def share_between_workers() -> None:
    """Make the shared counters (gunicorn's master, before any worker forks)."""
    global _slots, _connections
    if _slots is None:
        _slots = multiprocessing.RawArray("i", SLOTS)
        _connections = multiprocessing.RawArray("i", SLOTS)


def assign_slot(worker: Any, live: Iterable[Any]) -> None:
    """Master, before forking ``worker``: a slot no ``live`` worker holds (None when all are taken)."""
    taken = {getattr(other, "inflight_slot", None) for other in live}
    free = [slot for slot in range(SLOTS) if slot not in taken] if _slots is not None else []
    worker.inflight_slot = free[0] if free else None
    if free:
        _slots[free[0]] = 0
        _connections[free[0]] = 0  # until the worker's loop runs (hold_connections)


def claim_slot(worker: Any) -> None:
    """Worker, after the fork: count this process's requests in the slot the master gave it."""
    global _slot, _own
    _slot, _own = getattr(worker, "inflight_slot", None), 0


def release_slot(worker: Any) -> None:
    """Master, when ``worker`` has exited: the requests it was answering are gone with it."""
    slot = getattr(worker, "inflight_slot", None)
    if slot is not None and _slots is not None:
        _slots[slot] = 0
        _connections[slot] = 0


@contextmanager
def answering_one() -> Iterator[None]:
    """Count one request for the block."""
    _add(1)
    try:
        yield
    finally:
        _add(-1)


def _add(step: int) -> None:
    global _own
    with _lock:  # the worker's threads share its slot; other processes only read it
        if _slot is not None:
            _slots[_slot] += step
        else:
            _own += step


def answering() -> int:
    """Requests being answered now: every worker's under gunicorn, else this process's."""
    if _slot is None:
        return _own
    return int(sum(_slots))


def hold_connections(count: int) -> None:
    """This worker takes connections and has ``count`` open now."""
    if _slot is not None and _connections is not None:
        _connections[_slot] = count + 1


def fewest_connections(count: int) -> bool:
    """Whether no other worker taking connections has fewer open than ``count`` (True without slots)."""
    if _slot is None or _connections is None:
        return True
    return all(held == 0 or held - 1 >= count for slot, held in enumerate(_connections) if slot != _slot)


def surplus_connections(count: int) -> bool:
    """Whether a worker holding ``count`` connections holds two or more above another worker taking
    connections (False without slots): it answers one with "Connection: close", and the client's
    next connection goes where the accept rule sends it (``serving.gunicorn_worker``)."""
    if _slot is None or _connections is None:
        return False
    return any(held and count - (held - 1) >= 2 for slot, held in enumerate(_connections) if slot != _slot)


class InFlightMiddleware:
    """Counts the request while the rest of the stack answers it (first in ``MIDDLEWARE``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        with answering_one():
            return self.get_response(request)

"""Writes an answer does not need, done on a background thread so the caller does not wait.

``defer(work)`` hands ``work`` to this process's writer thread, which runs it on its own database
connection, in order. The retrieval log is the user: an INSERT and its WAL flush, about 2 ms of a
16 ms retrieve on the 2-core machine, which the caller (an HTTP client, an agent calling the
engine in process, ``manage.py mcp``) no longer waits for (DECISIONS.md, "The retrieval log and
the search's round trips").

``work`` runs at once, on the caller's connection, when the caller is inside a transaction
(another connection cannot see rows it has not committed, and the work belongs with it) or when
the queue is full (``QUEUE_LIMIT``: back-pressure, never a dropped write). Work that fails is
logged, never raised. At exit the queue is drained (``flush``), for ``EXIT_WAIT_S`` at most.
Tests drain it after each test (``tests/conftest.py``).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable
from contextlib import nullcontext

from django.db import DatabaseError, connection, connections, transaction

log = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
EXIT_WAIT_S = 10.0

_lock = threading.Lock()
_writer: tuple[int, queue.Queue[Callable[[], None]]] | None = None


def defer(work: Callable[[], None]) -> None:
    """Run ``work`` soon on the writer thread (at once inside a transaction or when the queue is full)."""
    if connection.in_atomic_block:
        _run(work)
        return
    try:
        _queue().put_nowait(work)
    except queue.Full:
        _run(work)


def flush(timeout: float = EXIT_WAIT_S, *, close: bool = False) -> bool:
    """Wait until the work deferred so far has run; whether it all did within ``timeout`` seconds.

    ``close`` also closes the writer's database connection (it opens a new one when next needed):
    at exit, and between tests, which must not leave a connection to a database they drop.
    """
    writer = _writer
    if writer is None or writer[0] != os.getpid():
        return True
    done = threading.Event()

    def mark() -> None:
        if close:
            connections.close_all()
        done.set()

    try:
        writer[1].put(mark, timeout=timeout)
    except queue.Full:
        return False
    return done.wait(timeout)


def _queue() -> queue.Queue[Callable[[], None]]:
    """This process's queue and its writer thread (started anew after a fork: threads do not survive it)."""
    global _writer
    writer = _writer
    if writer is not None and writer[0] == os.getpid():
        return writer[1]
    with _lock:
        if _writer is None or _writer[0] != os.getpid():
            work: queue.Queue[Callable[[], None]] = queue.Queue(QUEUE_LIMIT)
            threading.Thread(target=_serve, args=(work,), name="deferred-writes", daemon=True).start()
            _writer = (os.getpid(), work)
        return _writer[1]


def _serve(work: queue.Queue[Callable[[], None]]) -> None:
    while True:
        _run(work.get())


def _run(work: Callable[[], None]) -> None:
    inline = connection.in_atomic_block
    try:
        # Inside the caller's transaction, a savepoint: a failed write must not break the transaction.
        with transaction.atomic() if inline else nullcontext():
            work()
    except DatabaseError:
        log.exception("a deferred write failed")
        if not inline:  # the writer's own connection: a broken one is replaced on its next use
            connection.close_if_unusable_or_obsolete()
    except Exception:  # a lost log row must not become an error for the caller or stop the writer
        log.exception("a deferred write failed")


atexit.register(flush, close=True)

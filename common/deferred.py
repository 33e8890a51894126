"""Writes an answer does not need, done on a background thread so the caller does not wait.

``defer(work)`` hands ``work`` to this process's writer thread, which runs it on its own database
connection, in order. The retrieval log is the user: an INSERT and its WAL flush, about 2 ms of a
16 ms retrieve on the 2-core machine, which the caller (an HTTP client, an agent calling the
engine in process, ``manage.py mcp``) no longer waits for (docs/adr/0038-deferred-writes.md).

``work`` runs at once, on the caller's connection, when the caller is inside a transaction
(another connection cannot see rows it has not committed, and the work belongs with it) or when
the queue is full (``QUEUE_LIMIT``: back-pressure, never a dropped write). Work that fails is
logged, never raised. At exit the queue is drained (``flush``), for ``EXIT_WAIT_S`` at most.
Tests drain it after each test (``tests/conftest.py``).

Work goes in batches: the writer, on taking an item, sleeps ``LINGER_S`` and then takes what was
queued meanwhile, running the work in order and inserting each model's rows (``defer_insert``) in
one statement after it. The log's INSERT, one per retrieve, was ~0.45 ms of the ~15 ms of CPU a
retrieve costs at 100k memories and 4 clients. While it
sleeps the writer waits on no queue, so queueing an item wakes no thread: a caller holding the
GIL was otherwise switched out for the writer it woke, once per item. A flush ends
the sleep at once.
"""

from __future__ import annotations

import atexit
import functools
import logging
import queue
import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from django.db import DatabaseError, connection, connections, transaction
from django.db.models import Model

from common.per_process import PerProcess

log = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
EXIT_WAIT_S = 10.0
# How long the writer waits, after taking a row, for more rows to insert with it; and at most how
# many queued items it takes at once.
LINGER_S = 0.05
BATCH_LIMIT = 200


@dataclass(frozen=True)
class _Insert:
    """A row for the writer to insert (``defer_insert``)."""

    instance: Model


class _Marker:
    """A flush's marker: ends the writer's gathering, runs after everything queued before it."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback

    def __call__(self) -> None:
        self.callback()


_Item = Callable[[], None] | _Insert


@dataclass(frozen=True)
class _Writer:
    """This process's writer: its queue, and the event a flush sets to end its sleep."""

    work: queue.Queue[_Item]
    wake: threading.Event


def _start_writer() -> _Writer:
    writer = _Writer(queue.Queue(QUEUE_LIMIT), threading.Event())
    threading.Thread(target=_serve, args=(writer,), name="deferred-writes", daemon=True).start()
    return writer


# Started anew after a fork: threads do not survive it.
_writer = PerProcess(_start_writer)


def defer(work: Callable[[], None], *, database: bool = True) -> None:
    """Run ``work`` soon on the writer thread (at once inside a transaction or when the queue is full).

    ``database=False``: work that never touches the database (the vector cache's Redis writes) is
    queued inside a transaction too. Run at once there, it took a savepoint on the caller's
    connection, in the middle of the search's pipelined full-text statement when the query vectors
    were embedded (``retrieval.search.hybrid_search``)."""
    if database and connection.in_atomic_block:
        _run(work)
        return
    try:
        _queue().put_nowait(work)
    except queue.Full:
        _run(work)


def defer_insert(instance: Model) -> None:
    """Insert ``instance`` soon, in one statement with the other rows of its model queued meanwhile
    (at once inside a transaction or when the queue is full, as ``defer``).

    Rows go in as ``bulk_create`` would write them (``_insert_rows``), one at a time or in a batch:
    no ``save()`` override and no signals run for them, so this is for plain rows such as the
    retrieval log's."""
    insert_now = functools.partial(_insert, type(instance), [instance])
    if connection.in_atomic_block:
        _run(insert_now)
        return
    try:
        _queue().put_nowait(_Insert(instance))
    except queue.Full:
        _run(insert_now)


def flush(timeout: float = EXIT_WAIT_S, *, close: bool = False) -> bool:
    """Wait until the work deferred so far has run; whether it all did within ``timeout`` seconds.

    ``close`` also closes the writer's database connection (it opens a new one when next needed):
    at exit, and between tests, which must not leave a connection to a database they drop.
    """
    writer = _writer.peek()
    if writer is None:
        return True
    done = threading.Event()

    def mark() -> None:
        if close:
            connections.close_all()
        done.set()

    try:
        writer.work.put(_Marker(mark), timeout=timeout)
    except queue.Full:
        return False
    writer.wake.set()
    return done.wait(timeout)


def _queue() -> queue.Queue[_Item]:
    """This process's queue (its writer thread started on first use)."""
    return _writer.get().work


def _serve(writer: _Writer) -> None:
    while True:
        _run_batch(_gather(writer.work, writer.wake))


def _gather(work: queue.Queue[_Item], wake: threading.Event) -> list[_Item]:
    """The next item and, after ``LINGER_S`` (cut short by a flush), what was queued meanwhile,
    up to ``BATCH_LIMIT`` items."""
    items = [work.get()]
    if not isinstance(items[0], _Marker):
        wake.wait(LINGER_S)
    wake.clear()
    while len(items) < BATCH_LIMIT:
        try:
            items.append(work.get_nowait())
        except queue.Empty:
            break
    return items


def _run_batch(items: list[_Item]) -> None:
    """The gathered work in order, the rows together after it (one INSERT per model), a flush's
    marker last."""
    rows: dict[type[Model], list[Model]] = {}
    markers = []
    for item in items:
        if isinstance(item, _Insert):
            rows.setdefault(type(item.instance), []).append(item.instance)
        elif isinstance(item, _Marker):
            markers.append(item)
        else:
            _run(item)
    for model, instances in rows.items():
        _run(functools.partial(_insert, model, instances))
    for marker in markers:
        _run(marker)


def _insert(model: type[Model], instances: list[Model]) -> None:
    """One INSERT for ``instances``; if it fails, each row on its own, so one bad row loses only itself."""
    try:
        _insert_rows(model, instances)
    except DatabaseError:
        if len(instances) == 1:
            raise
        log.warning("a deferred insert of %d %s rows failed; inserting them one by one", len(instances), model.__name__)
        connection.close_if_unusable_or_obsolete()
        for instance in instances:
            _run(functools.partial(_insert, model, [instance]))


def _insert_rows(model: type[Model], instances: list[Model]) -> None:
    """``instances`` in one INSERT, each column as ``bulk_create`` would write it (the field's
    ``pre_save`` and database value; a primary key the database numbers and generated columns are
    left to it), without the ORM's query building: 0.34-0.43 ms a retrieval log row before,
    0.20-0.22 this way, three rows a statement with its round trip.
    The instances get no primary key back: nobody reads them.
    """
    fields = [
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and field.db_returning) and not getattr(field, "generated", False)
    ]
    values = [field.get_db_prep_save(field.pre_save(row, True), connection) for row in instances for field in fields]
    placeholders = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(instances))
    columns = ", ".join(connection.ops.quote_name(str(field.column)) for field in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({columns}) VALUES {placeholders}", values
        )


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

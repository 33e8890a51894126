"""Deferred writes: the caller does not wait for them, and none is lost."""

from __future__ import annotations

import logging
import queue
import threading

import pytest
from django.db import connection

from memoryhub import deferred


def _thread_names() -> tuple[list[str], object]:
    names: list[str] = []
    return names, lambda: names.append(threading.current_thread().name)


def test_outside_a_transaction_work_runs_on_the_writer_thread():
    names, work = _thread_names()
    deferred.defer(work)
    assert deferred.flush(5)
    assert names == ["deferred-writes"]


def test_inside_a_transaction_work_runs_at_once_on_the_callers_connection(db):
    names, work = _thread_names()
    deferred.defer(work)
    assert names == [threading.current_thread().name]


def test_work_that_fails_is_logged_and_later_work_still_runs(caplog):
    names, work = _thread_names()
    with caplog.at_level(logging.ERROR):
        deferred.defer(lambda: 1 / 0)  # type: ignore[func-returns-value]
        deferred.defer(work)
        assert deferred.flush(5)
    assert names == ["deferred-writes"]
    assert "a deferred write failed" in caplog.text


def test_a_failed_write_inside_a_transaction_leaves_the_transaction_usable(db, caplog):
    def bad_write() -> None:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO no_such_table VALUES (1)")

    with caplog.at_level(logging.ERROR):
        deferred.defer(bad_write)
    with connection.cursor() as cursor:  # the caller's transaction goes on
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert "a deferred write failed" in caplog.text


def test_a_full_queue_runs_the_work_at_once_instead_of_dropping_it():
    release = threading.Event()
    deferred.defer(lambda: release.wait(10))  # the writer is busy
    assert deferred.flush(0.2) is False  # it cannot finish while the writer is busy
    queued = deferred._queue()
    filler: list[int] = []
    with pytest.raises(queue.Full):
        while True:
            queued.put_nowait(lambda: filler.append(1))
    names, work = _thread_names()
    deferred.defer(work)
    assert names == [threading.current_thread().name]  # ran here, not dropped
    release.set()
    assert deferred.flush(10)
    assert len(filler) == deferred.QUEUE_LIMIT - 1  # the flush marker queued behind the busy work took one place


@pytest.mark.django_db(transaction=True)
def test_flush_waits_for_work_deferred_before_it():
    done: list[int] = []
    for value in range(50):
        deferred.defer(lambda value=value: done.append(value))
    assert deferred.flush(5)
    assert done == list(range(50))

"""Deferred writes: the caller does not wait for them, and none is lost."""

from __future__ import annotations

import logging
import queue
import threading
import time

import pytest
from django.db import connection

from common import deferred
from memories.models import Project
from retrieval.models import RetrievalLog


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


def test_inside_a_transaction_work_without_the_database_still_runs_on_the_writer_thread(db):
    names, work = _thread_names()
    deferred.defer(work, database=False)
    assert deferred.flush(5)
    assert names == ["deferred-writes"]


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
    waiting = queued.qsize()  # the flush marker, unless the writer took it with the busy work
    filler: list[int] = []
    with pytest.raises(queue.Full):
        while True:
            queued.put_nowait(lambda: filler.append(1))
    names, work = _thread_names()
    deferred.defer(work)
    assert names == [threading.current_thread().name]  # ran here, not dropped
    release.set()
    assert deferred.flush(10)
    assert len(filler) == deferred.QUEUE_LIMIT - waiting  # every place the queue had left was filled


@pytest.mark.django_db(transaction=True)
def test_flush_waits_for_work_deferred_before_it():
    done: list[int] = []
    for value in range(50):
        deferred.defer(lambda value=value: done.append(value))
    assert deferred.flush(5)
    assert done == list(range(50))


def _log_row(project: Project, correlation_id: str) -> RetrievalLog:
    return RetrievalLog(project=project, user_id="alice", correlation_id=correlation_id, query_hash="0", latency_ms=1.0)


@pytest.mark.django_db(transaction=True)
def test_rows_queued_while_the_writer_is_busy_go_in_one_statement(project):
    release = threading.Event()
    deferred.defer(lambda: release.wait(10))  # the writer is busy
    for number in range(5):
        deferred.defer_insert(_log_row(project, f"batch-{number}"))
    release.set()
    assert deferred.flush(10)
    with connection.cursor() as cursor:  # one INSERT, one transaction: every row has the same xmin
        cursor.execute("SELECT count(*), count(DISTINCT xmin::text) FROM retrieval_retrievallog")
        assert cursor.fetchone() == (5, 1)


@pytest.mark.django_db(transaction=True)
def test_a_flush_ends_the_writers_wait_for_more_rows(project, monkeypatch):
    monkeypatch.setattr(deferred, "LINGER_S", 60.0)  # were the marker not to end it, the flush would time out
    deferred.defer_insert(_log_row(project, "lingering"))
    assert deferred.flush(10)
    assert RetrievalLog.objects.filter(correlation_id="lingering").exists()


@pytest.mark.django_db(transaction=True)
def test_a_row_that_cannot_be_inserted_loses_only_itself(project, caplog):
    release = threading.Event()
    deferred.defer(lambda: release.wait(10))
    deferred.defer_insert(_log_row(project, "good-1"))
    deferred.defer_insert(
        RetrievalLog(project_id=project.pk + 1000, user_id="x", correlation_id="orphan", latency_ms=1)
    )
    deferred.defer_insert(_log_row(project, "good-2"))
    with caplog.at_level(logging.WARNING):
        release.set()
        assert deferred.flush(10)
    assert sorted(RetrievalLog.objects.values_list("correlation_id", flat=True)) == ["good-1", "good-2"]
    assert "inserting them one by one" in caplog.text
    assert "a deferred write failed" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_logged_row_keeps_the_time_it_was_made_not_the_time_it_was_inserted(project):
    release = threading.Event()
    deferred.defer(lambda: release.wait(10))
    row = _log_row(project, "when")
    made = row.created_at
    deferred.defer_insert(row)
    time.sleep(0.01)  # the insert comes later still
    release.set()
    assert deferred.flush(10)
    assert RetrievalLog.objects.get(correlation_id="when").created_at == made


def test_inside_a_transaction_a_row_is_inserted_at_once_with_the_callers_work(project):
    deferred.defer_insert(_log_row(project, "inline"))
    assert RetrievalLog.objects.filter(correlation_id="inline").exists()  # visible in this transaction


@pytest.mark.django_db(transaction=True)
def test_queueing_while_the_writer_sleeps_wakes_no_thread(project, monkeypatch):
    monkeypatch.setattr(deferred, "LINGER_S", 60.0)
    deferred.defer_insert(_log_row(project, "first"))
    work = deferred._queue()
    deadline = time.monotonic() + 5
    while not work.empty() and time.monotonic() < deadline:  # the writer has taken it and sleeps
        time.sleep(0.005)
    time.sleep(0.02)
    # Nobody waits on the queue, so a put notifies nobody: the caller keeps the CPU and the GIL.
    assert work.empty() and not work.not_empty._waiters  # type: ignore[attr-defined]
    deferred.defer_insert(_log_row(project, "second"))
    assert deferred.flush(10)
    with connection.cursor() as cursor:  # and both rows went in together, after the sleep
        cursor.execute("SELECT count(*), count(DISTINCT xmin::text) FROM retrieval_retrievallog")
        assert cursor.fetchone() == (2, 1)


@pytest.mark.django_db(transaction=True)
def test_a_deferred_row_is_stored_as_the_orm_stores_it(project):
    """The writer's own INSERT (``_insert_rows``) writes every column as ``bulk_create`` does: JSON
    lists and objects, text that needs quoting, floats, booleans, the time the row was made."""

    def row(correlation_id: str) -> RetrievalLog:
        return RetrievalLog(
            project=project,
            user_id='o\'brien \\ "quoted" ü',
            correlation_id=correlation_id,
            query_hash="ab" * 32,
            result_count=2,
            memory_ids=["0b8a3e6c-0d7e-4b6f-9a43-2f1d5a7c9e01", "it's"],
            scores=[0.5123, 1e-07],
            latency_ms=15.25,
            degraded=["hyde_unavailable"],
            timings={"embed": 3.7, "total": 14.0, "naïve": 0.0},
            cached=True,
        )

    RetrievalLog.objects.bulk_create([row("by-orm")])
    deferred.defer_insert(row("by-writer"))
    deferred.defer_insert(row("by-writer-too"))
    assert deferred.flush(10)
    columns = [
        f.attname for f in RetrievalLog._meta.concrete_fields if f.attname not in ("id", "correlation_id", "created_at")
    ]
    stored = {r["correlation_id"]: r for r in RetrievalLog.objects.values("correlation_id", *columns)}
    assert stored.keys() == {"by-orm", "by-writer", "by-writer-too"}
    assert {key: value for key, value in stored["by-writer"].items() if key != "correlation_id"} == {
        key: value for key, value in stored["by-orm"].items() if key != "correlation_id"
    }
    with connection.cursor() as cursor:  # the same JSON types as the ORM's, not strings holding JSON
        cursor.execute("SELECT DISTINCT jsonb_typeof(memory_ids), jsonb_typeof(timings) FROM retrieval_retrievallog")
        assert cursor.fetchall() == [("array", "object")]

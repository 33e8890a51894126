"""Work deferred until the response has gone: the retrieval log is still written, just later."""

from __future__ import annotations

import logging

from django.core.signals import request_finished, request_started

from memoryhub import after_response


def test_deferred_work_waits_for_the_end_of_the_request():
    done: list[str] = []
    request_started.send(sender=None)
    after_response.defer(lambda: done.append("logged"))
    assert done == []
    request_finished.send(sender=None)
    assert done == ["logged"]


def test_outside_a_request_deferred_work_runs_at_once():
    done: list[str] = []
    after_response.defer(lambda: done.append("now"))
    assert done == ["now"]


def test_deferred_work_that_fails_is_logged_and_the_rest_still_runs(caplog):
    done: list[str] = []
    request_started.send(sender=None)
    after_response.defer(lambda: 1 / 0)  # type: ignore[func-returns-value]
    after_response.defer(lambda: done.append("second"))
    with caplog.at_level(logging.ERROR):
        request_finished.send(sender=None)
    assert done == ["second"]
    assert "deferred until after the response failed" in caplog.text

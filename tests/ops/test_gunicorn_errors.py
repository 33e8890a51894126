"""Guards a regression: gunicorn's own refusals (a 414 for an over-long request line) answered HTML."""

from __future__ import annotations

import http.client
import json

import pytest

from evaluation.harness import Service

# The service under test serves from the suite's Postgres and Redis.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("servers")]


def test_gunicorn_refusals_answer_in_the_error_envelope():
    with Service(worker=False, ready="listening") as service:  # gunicorn refuses before any database use
        conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
        conn.request("GET", "/api/v1/memories?user_id=" + "a" * 10_000)
        response = conn.getresponse()
        body = response.read()
        conn.close()
    assert response.status == 414
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(body)["error"]["code"] == "uri_too_long"

"""Guards a regression: a chunked request body reached Django empty (422 "body required")."""

from __future__ import annotations

import io
import json

import pytest
from django.core import signals
from django.db import close_old_connections

from memoryhub.wsgi import ChunkedBodies, application

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def keep_test_connection():
    """As Django's test client does: a request must not close the test's connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def environ(body: bytes, key: str) -> dict:
    """What gunicorn hands the app for a chunked request: de-chunked input, no Content-Length."""
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/memories",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "HTTP_HOST": "localhost",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_AUTHORIZATION": f"Bearer {key}",
    }


def run(app, env):
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"] = int(status.split()[0])

    body = b"".join(app(env, start_response))
    return seen["status"], json.loads(body)


def test_a_chunked_body_is_read_and_the_memory_created(api):
    body = json.dumps({"user_id": "alice", "content": "Alice sends chunked bodies."}).encode()
    status, answer = run(application, environ(body, api.key))
    assert (status, answer["content"]) == (201, "Alice sends chunked bodies.")


def test_a_chunked_body_over_the_limit_is_refused_in_the_envelope(api):
    status, answer = run(ChunkedBodies(application, limit=100), environ(b"x" * 101, api.key))
    assert (status, answer["error"]["code"]) == (413, "payload_too_large")

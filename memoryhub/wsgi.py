"""WSGI entry point for gunicorn.

``ChunkedBodies`` wraps Django: a request sent with ``Transfer-Encoding: chunked`` has no
``Content-Length``, and Django then reads an empty body (the API answered 422 "body
required"). gunicorn de-chunks ``wsgi.input``; the wrapper reads it, up to the body limit, and
hands Django the body with its length (over the limit: 413 in the error envelope).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")


class ChunkedBodies:
    def __init__(self, app: Callable[..., Iterable[bytes]], limit: int) -> None:
        self.app, self.limit = app, limit

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            body = environ["wsgi.input"].read(self.limit + 1)
            if len(body) > self.limit:
                message = f"request body is larger than {self.limit} bytes"
                error = {"error": {"code": "payload_too_large", "message": message, "details": None}}
                start_response("413 Content Too Large", [("Content-Type", "application/json")])
                return [json.dumps(error).encode()]
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)


def _application() -> ChunkedBodies:
    django_app = get_wsgi_application()  # sets Django up: settings are readable after it
    return ChunkedBodies(django_app, settings.MEMORYHUB_MAX_BODY_BYTES)


application = _application()

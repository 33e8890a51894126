"""A rate-limiting gateway on loopback in front of the live test server, for the client's
retries: the API itself degrades over its limit (200, ``rate_limited``) instead of answering
429, but a proxy or gateway in front of it may still answer 429 with ``Retry-After``.

It forwards ``allow`` requests, then answers 429 in the API's error envelope until
:meth:`RateLimitingProxy.reopen` is called (what the gateway's window closing would do).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RateLimitingProxy:
    def __init__(self, upstream: str, *, allow: int = 1, retry_after: int = 7) -> None:
        self.upstream, self.allow, self.retry_after = upstream.rstrip("/"), allow, retry_after
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self, "GET")

            def do_POST(self) -> None:
                proxy.handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reopen(self) -> None:
        with self.lock:
            self.allow = 1_000_000

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        with self.lock:
            passes = self.allow > 0
            self.allow -= 1 if passes else 0
        if not passes:
            body = {"error": {"code": "rate_limited", "message": "slow down", "details": None}}
            self.reply(handler, 429, json.dumps(body).encode(), {"Retry-After": str(self.retry_after)})
            return
        length = int(handler.headers.get("Content-Length") or 0)
        forwarded = urllib.request.Request(
            self.upstream + handler.path,
            data=handler.rfile.read(length) if length else None,
            method=method,
            headers={k: v for k, v in handler.headers.items() if k.lower() in ("authorization", "content-type")},
        )
        try:
            with urllib.request.urlopen(forwarded, timeout=30) as upstream:
                self.reply(handler, upstream.status, upstream.read(), {})
        except urllib.error.HTTPError as error:
            self.reply(handler, error.code, error.read(), {})

    @staticmethod
    def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

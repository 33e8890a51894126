"""One HTTP/1.1 request on a connection of its own, for the hooks (docs/adr/0109-hook-http-request.md).

A context hook is a process per prompt, and ``http.client`` (with the ``email`` package it parses
headers with) costs that process more CPU to import than the whole request to a server on the
same machine takes. A hook needs far less than it offers: one request written out whole, one
answer read to its end, the connection closed. The answer's body is framed as HTTP/1.1 allows:
``Content-Length``, chunked transfer coding, or the server closing the connection. ``https`` URLs
go through :mod:`ssl` with the system's certificates, as ``http.client`` would.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

# Only for annotations: a context hook does not import typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import BinaryIO

# As http.client's: a line or a header block longer than this is not an answer from our server.
MAX_LINE = 65_536
MAX_HEADERS = 100


class ProtocolError(OSError):
    """The answer is not HTTP/1.x, or ends before its body does."""


def post(url: str, body: bytes, headers: Mapping[str, str], *, timeout: float) -> tuple[int, bytes]:
    """``POST`` ``body`` to ``url``; the answer's status and body. ``timeout`` bounds connecting
    and each read (the caller bounds the whole). Raises ``OSError`` (``ProtocolError``, timeouts,
    refused connections) and ``ValueError`` for a URL or header it cannot send."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    host, secure = parts.hostname, parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    head = _request_head(parts.path or "/", parts.netloc.rpartition("@")[2], headers, len(body))
    connection = socket.create_connection((host, port), timeout=timeout)
    try:
        if secure:
            import ssl  # noqa: PLC0415 (plain http, the usual hook setup, never pays for it)

            connection = ssl.create_default_context().wrap_socket(connection, server_hostname=host)
        connection.sendall(head + body)
        with connection.makefile("rb") as answer:
            return read_answer(answer)
    finally:
        connection.close()


def _request_head(target: str, host: str, headers: Mapping[str, str], length: int) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += [f"Content-Length: {length}", "Connection: close"]
    for line in lines:
        # A CR or LF in a value would start a header (or a request) of the value's choosing.
        if any(c in line for c in "\r\n\0") or not line.isascii():
            raise ValueError(f"cannot send {line.partition(':')[0]!r}: it has a control or non-ASCII character")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def read_answer(answer: BinaryIO) -> tuple[int, bytes]:
    """The status and body of the answer ``answer`` reads, after any interim (1xx) answers."""
    status, fields = _head(answer)
    while 100 <= status < 200:
        status, fields = _head(answer)
    if status in (204, 304):
        return status, b""
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return status, _chunked(answer)
    if "content-length" in fields:
        try:
            length = int(fields["content-length"])
        except ValueError:
            raise ProtocolError(f"bad Content-Length: {fields['content-length']!r}") from None
        return status, _exactly(answer, length)
    return status, answer.read()


def _head(answer: BinaryIO) -> tuple[int, dict[str, str]]:
    line = _line(answer)
    if not line:
        raise ProtocolError("the server closed the connection without answering")
    version, _, rest = line.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not rest[:3].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {line[:60]!r}")
    fields: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = _line(answer)
        if line in (b"\r\n", b"\n", b""):
            return int(rest[:3]), fields
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        # Repeated fields are one comma-separated list (RFC 9110 section 5.3).
        fields[name] = f"{fields[name]}, {value.strip()}" if name in fields else value.strip()
    raise ProtocolError(f"more than {MAX_HEADERS} header fields")


def _chunked(answer: BinaryIO) -> bytes:
    chunks = []
    while True:
        size_line = _line(answer)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size: {size_line[:40]!r}") from None
        if size == 0:
            break
        chunks.append(_exactly(answer, size))
        if _line(answer) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk is longer than its size")
    while _line(answer) not in (b"\r\n", b"\n", b""):  # trailer fields: none of them matter here
        pass
    return b"".join(chunks)


def _line(answer: BinaryIO) -> bytes:
    line = answer.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("a line of the answer is too long")
    return line


def _exactly(answer: BinaryIO, size: int) -> bytes:
    data = answer.read(size)
    if len(data) < size:
        raise ProtocolError(f"the answer ended {size - len(data)} bytes early")
    return data

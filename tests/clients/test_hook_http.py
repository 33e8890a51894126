"""The hooks' one-request HTTP reader and writer (``memoryhub_client.cli.hook_http``): answers as
bytes, and requests to a socket on loopback. Against the live server, through gateways that
frame its answers otherwise and over TLS: tests/clients/test_hooks.py."""

from __future__ import annotations

import io
import socket
import threading

import pytest
from memoryhub_client.cli.hook_http import ProtocolError, post, read_answer


def answer(raw: bytes) -> tuple[int, bytes]:
    return read_answer(io.BytesIO(raw))


def test_a_body_is_read_by_its_length_and_no_further():
    assert answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, and more") == (200, b"hello")


def test_chunks_with_extensions_and_trailers_make_one_body():
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    raw = head + b'4;a=b\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-T: y\r\n\r\n'
    assert answer(raw) == (200, b'{"a": 1}')


def test_without_length_or_chunks_the_body_ends_with_the_connection():
    assert answer(b"HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\n\r\n{}") == (404, b"{}")


def test_interim_answers_come_before_the_answer():
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\n"
    assert answer(raw + b"Content-Length: 2\r\n\r\nok") == (201, b"ok")


def test_a_no_content_answer_has_no_body():
    assert answer(b"HTTP/1.1 204 No Content\r\n\r\n") == (204, b"")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "without answering"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "ended 5 bytes early"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "longer than its size"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", "more than 100 header fields"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", "too long"),
    ],
)
def test_what_is_not_a_whole_http_answer_is_an_error(raw, says):
    with pytest.raises(ProtocolError, match=says):
        answer(raw)


def test_a_value_that_would_start_a_header_of_its_own_is_not_sent():
    with pytest.raises(ValueError, match="Authorization"):
        post("http://127.0.0.1:9/api", b"{}", {"Authorization": "Bearer x\r\nX-Admin: 1"}, timeout=1)


def test_only_http_urls_are_posted_to():
    with pytest.raises(ValueError, match="not an http"):
        post("ftp://example.com/", b"{}", {}, timeout=1)


def test_the_request_is_one_post_with_its_length_to_the_urls_path_and_the_connection_closes():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        received: list[bytes] = []

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                data = b""
                while not data.endswith(b"{}"):
                    data += connection.recv(4096)
                received.append(data)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")

        server = threading.Thread(target=serve)
        server.start()
        port = listener.getsockname()[1]
        status, body = post(f"http://127.0.0.1:{port}/base/api/v1/retrieve", b"{}", {"Accept": "x"}, timeout=5)
        server.join(5)
    assert (status, body) == (200, b"[]")
    head = received[0].decode().split("\r\n")
    assert head[0] == "POST /base/api/v1/retrieve HTTP/1.1"
    assert {f"Host: 127.0.0.1:{port}", "Accept: x", "Content-Length: 2", "Connection: close"} <= set(head)

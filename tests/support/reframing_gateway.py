"""A gateway on loopback in front of the live test server that sends the server's answers on in
another HTTP/1.1 framing, optionally over TLS: what a reverse proxy in front of MemoryHub may do,
for the hooks' own HTTP reader (``memoryhub_client.cli.hook_http``).

Framings: ``chunked`` (small chunks with chunk extensions, then a trailer field), ``close`` (no
``Content-Length``: the body ends when the connection does), ``continue`` (an interim
``100 Continue`` answer first, then the answer with its length).
"""

from __future__ import annotations

import datetime
import http.client
import socketserver
import ssl
import threading
from io import BufferedIOBase
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

FRAMINGS = ("chunked", "close", "continue")


def self_signed(folder: Path, host: str = "localhost") -> tuple[Path, Path]:
    """A certificate for ``host`` signed by its own key: (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "gateway.pem", folder / "gateway.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


class ReframingGateway:
    def __init__(self, upstream: str, *, framing: str, tls: tuple[Path, Path] | None = None) -> None:
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}")
        target = urlsplit(upstream)
        gateway = self
        context = None
        if tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*tls)

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                if context is not None:
                    self.connection = context.wrap_socket(self.connection, server_side=True)
                    self.rfile, self.wfile = self.connection.makefile("rb"), self.connection.makefile("wb")
                gateway.forward(self.rfile, self.wfile, target.hostname or "127.0.0.1", target.port or 80, framing)

        self.tls = tls is not None
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def forward(rfile: BufferedIOBase, wfile: BufferedIOBase, host: str, port: int, framing: str) -> None:
        request_line = rfile.readline().decode("latin-1").split()
        headers: dict[str, str] = {}
        while (line := rfile.readline().decode("latin-1")) not in ("\r\n", "\n", ""):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = rfile.read(int(headers.get("content-length") or 0))
        upstream = http.client.HTTPConnection(host, port, timeout=30)
        try:
            wanted = {k: v for k, v in headers.items() if k in ("authorization", "content-type", "accept")}
            upstream.request(request_line[0], request_line[1], body=body, headers=wanted)
            answer = upstream.getresponse()
            status, reason, data = answer.status, answer.reason, answer.read()
        finally:
            upstream.close()
        out = [f"HTTP/1.1 {status} {reason}\r\n".encode(), b"Content-Type: application/json\r\n"]
        if framing == "continue":
            out.insert(0, b"HTTP/1.1 100 Continue\r\n\r\n")
            out += [f"Content-Length: {len(data)}\r\n\r\n".encode(), data]
        elif framing == "close":
            out += [b"Connection: close\r\n\r\n", data]
        else:
            out.append(b"Transfer-Encoding: chunked\r\n\r\n")
            for start in range(0, len(data), 7):
                piece = data[start : start + 7]
                out.append(f"{len(piece):x};piece={start}\r\n".encode() + piece + b"\r\n")
            out.append(b"0\r\nX-Trailer: done\r\n\r\n")
        wfile.write(b"".join(out))
        wfile.flush()

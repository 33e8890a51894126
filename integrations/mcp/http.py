"""``/mcp/``: the MCP server over streamable HTTP, inside the Django (WSGI) service.

The view authenticates the Bearer key exactly as the API does (``api_key_authenticate``,
which also confines the connection to the key's project), then hands the request to the
SDK's ``StreamableHTTPSessionManager`` in stateless JSON mode, as an in-process ASGI call
under ``async_to_sync``. Stateless because a gunicorn worker keeps nothing between requests
(any worker may get the next one); JSON because a WSGI response is one body.
docs/adr/0048-mcp-server.md has the alternatives.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from integrations.mcp.server import build_server
from integrations.mcp.tools import Principal
from memories.tenancy import api_key_authenticate

USER_HEADER = "X-MemoryHub-User"


def _refused(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message, "details": None}}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="memoryhub"'
    return response


@csrf_exempt  # a Bearer key, never a cookie, authenticates here
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """One MCP message (or batch) per POST; the key picks the project, the header may fix the user."""
    if request.method != "POST":
        # Stateless: no standalone SSE stream (GET) and no session to end (DELETE); the spec
        # lets a server answer 405 to both.
        refused = _refused(405, "method_not_allowed", f"{request.method} is not allowed here; allowed: POST")
        refused["Allow"] = "POST"
        return refused
    try:
        body = request.body
    except RequestDataTooBig:
        return _refused(413, "payload_too_large", "request body is larger than the server accepts")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    key = api_key_authenticate(token=token.strip()) if scheme.lower() == "bearer" and token.strip() else None
    if key is None:
        return _refused(401, "unauthorized", "missing, unknown or revoked API key (Authorization: Bearer <key>)")
    user_id = request.headers.get(USER_HEADER)
    if user_id is not None and not 1 <= len(user_id) <= 255:
        return _refused(422, "invalid_user_id", f"{USER_HEADER} must be 1 to 255 characters")
    principal = Principal(project=key.project, actor=f"api_key:{key.prefix}", user_id=user_id)
    status, headers, answer = async_to_sync(_serve)(principal, _asgi_scope(request), body)
    response = HttpResponse(answer, status=status)
    for name, value in headers:
        if name.lower() not in ("content-length", "transfer-encoding", "connection"):
            response[name] = value
    return response


def _asgi_scope(request: HttpRequest) -> dict[str, Any]:
    """The ASGI scope of this WSGI request, as an ASGI server would have built it."""
    headers = [
        (name.lower().encode("latin-1"), str(value).encode("latin-1")) for name, value in request.headers.items()
    ]
    host = request.get_host()
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method or "GET",
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (host.rsplit(":", 1)[0], int(request.get_port() or 80)),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve(principal: Principal, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run the SDK's transport for one request; its status, headers and body."""
    manager = StreamableHTTPSessionManager(
        app=build_server(principal),
        json_response=True,
        stateless=True,
        max_request_body_size=settings.MEMORYHUB_MAX_BODY_BYTES,
    )
    sent = False
    answer: dict[str, Any] = {"status": 500, "headers": [], "body": b""}

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]

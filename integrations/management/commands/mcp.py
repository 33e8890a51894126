"""python manage.py mcp --project <slug> | --key <api key> [--user <id>]: MCP over stdio (docs/guide.md "MCP")."""

from __future__ import annotations

import threading
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp.server.stdio import stdio_server

from common import row_security
from integrations.mcp.server import build_server
from integrations.mcp.tools import Principal
from memories.models import Project
from memories.tenancy import api_key_authenticate
from retrieval.embedding.embedders import warm_queries


class Command(BaseCommand):
    help = "Serve the MCP server over stdin/stdout for a desktop agent (one project, optionally one user)."

    def add_arguments(self, parser: CommandParser) -> None:
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--project", help="project slug (whoever runs this command may act in it)")
        who.add_argument("--key", help="a project API key: the project is the key's, as over HTTP")
        parser.add_argument(
            "--user", default=None, help="the end user every call acts for (without it, each call names user_id)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user_id = options["user"]
        if user_id is not None and not 1 <= len(user_id) <= 255:
            raise CommandError("--user must be 1 to 255 characters")
        principal = self._principal(options, user_id)
        # The query session (~0.4 s to build) loads beside the handshake instead of in the first
        # search; a search that comes first waits for the same load, never builds a second.
        threading.Thread(target=warm_queries, name="warm-queries", daemon=True).start()
        anyio.run(_serve, principal)

    def _principal(self, options: dict[str, Any], user_id: str | None) -> Principal:
        if options["key"]:
            key = api_key_authenticate(token=options["key"])
            # Authenticating entered the tenant role on this thread; the calls run on another
            # and enter it there, one call at a time.
            row_security.leave()
            if key is None:
                raise CommandError("unknown or revoked API key")
            return Principal(project=key.project, actor=f"api_key:{key.prefix}", user_id=user_id, long_lived=True)
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        return Principal(project=project, actor="system:mcp-stdio", user_id=user_id, long_lived=True)


async def _serve(principal: Principal) -> None:
    server = build_server(principal)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())

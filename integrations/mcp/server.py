"""The SDK's low-level MCP server over :mod:`integrations.mcp.tools`, for one principal.

The SDK's handlers are coroutines; the tools are synchronous Django code. Each call runs
through ``sync_to_async(thread_sensitive=True)``: under the HTTP view (``async_to_sync``)
that is the request's own thread, so the call uses the connection the view authenticated
and confined to the key's project, and the ``RowSecurityMiddleware`` leaves the tenant role
after it. Over stdio it is one dedicated thread, which enters and leaves the project per call.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from integrations.mcp.tools import (
    PROFILE_TEMPLATE,
    RESOURCE_TEMPLATE,
    TOOLS,
    Principal,
    ToolError,
    call_tool,
    category_resources,
    input_schema,
    output_schema,
    profile_resource_uri,
    read_resource,
)

INSTRUCTIONS = (
    "MemoryHub is this user's long-term memory. Call query_memory before answering anything that may "
    "depend on earlier conversations, preferences or decisions; store durable facts with add_memory "
    "(or hand whole turns to capture_conversation); correct with update_memory or supersede_memory. "
    "Errors carry the HTTP API's error codes in structuredContent.error.code."
)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def build_server(principal: Principal) -> Server[Any]:
    """An MCP server whose tools and resources act as ``principal`` (a key's project, maybe one user)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=input_schema(tool, principal=principal),
                    output_schema=output_schema(tool),
                )
                for tool in TOOLS.values()
            ]
        )

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; tools: {', '.join(TOOLS)}")
        try:
            answer = await sync_to_async(call_tool, thread_sensitive=True)(
                principal, params.name, dict(params.arguments or {})
            )
        except ToolError as error:
            # A tool's failure is a result the model reads (and can correct), not a protocol error.
            return types.CallToolResult(
                content=[types.TextContent(text=_json(error.envelope))],
                structured_content=error.envelope,
                is_error=True,
            )
        return types.CallToolResult(content=[types.TextContent(text=_json(answer))], structured_content=answer)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        # The connection's user has a profile resource too (none when each call names its user).
        profile_listing = (
            [
                types.Resource(
                    uri=profile_resource_uri(user_id=principal.user_id),
                    name="profile",
                    description="The user's profile: standing facts and the memories they rest on",
                    mime_type="application/json",
                )
            ]
            if principal.user_id is not None
            else []
        )
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=uri,
                    name=f"memories: {category}",
                    description=f"The user's newest memories in the category {category!r}",
                    mime_type="application/json",
                )
                for uri, category in category_resources(principal)
            ]
            + profile_listing
        )

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=RESOURCE_TEMPLATE,
            name="memories by category",
            description="One user's newest memories in one category (GET /api/v1/memories?category=…)",
            mime_type="application/json",
        )
        profile = types.ResourceTemplate(
            uri_template=PROFILE_TEMPLATE,
            name="profile",
            description="One user's profile (GET /api/v1/users/{user_id}/profile)",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template, profile])

    async def read(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            page = await sync_to_async(read_resource, thread_sensitive=True)(principal, params.uri)
        except ToolError as error:
            # Reading is not a tool call: its failure is a JSON-RPC error, with the API envelope as data.
            raise MCPError(types.INVALID_PARAMS, error.envelope["error"]["message"], data=error.envelope) from error
        contents = types.TextResourceContents(uri=params.uri, mime_type="application/json", text=_json(page))
        return types.ReadResourceResult(contents=[contents])

    def tool_input_schema(name: str) -> dict[str, Any] | None:
        return input_schema(TOOLS[name], principal=principal) if name in TOOLS else None

    return Server(
        "memoryhub",
        version="1",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read,
    )

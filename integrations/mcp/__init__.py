"""The MCP server: MemoryHub's API as Model Context Protocol tools and resources (docs/guide.md "MCP").

``tools`` runs one tool as the matching API operation would (same schemas, services,
selectors and error codes); ``server`` wraps that in the SDK's low-level server; ``http``
serves it at ``/mcp/`` with the project API keys, and the ``mcp`` management command over stdio.
"""

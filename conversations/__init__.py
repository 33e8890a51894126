"""Conversations: durable chat history (Postgres), its Redis tail, and the window cleaner.

Above ``memories`` (whose models hold the rows) and below ``retrieval`` and ``capture``,
which read windows from here. See docs/architecture.md.
"""

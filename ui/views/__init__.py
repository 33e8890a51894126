"""The curation UI (htmx): one module per area; the role check lives in access.py."""

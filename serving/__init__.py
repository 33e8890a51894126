"""Starting and serving the service: `make run`, the embedded Postgres and Redis, gunicorn's
configuration, the local LLM server."""

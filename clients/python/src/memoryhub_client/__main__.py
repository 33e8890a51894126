"""``python -m memoryhub_client``: the ``memoryhub`` command line."""

from __future__ import annotations

from memoryhub_client.cli.app import run

run()

"""The ``memoryhub`` command line (``app.main``), installed with the client as a console script."""

from __future__ import annotations

from memoryhub_client.cli.app import main, run

__all__ = ["main", "run"]

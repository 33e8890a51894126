"""The ``memoryhub`` command line (``app.main``), installed with the client as a console script."""

from __future__ import annotations

import os
import sys

# Only for annotations: `memoryhub hook` comes through here, and importing typing costs it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def main(argv: list[str] | None = None) -> int:
    from memoryhub_client.cli.app import main as app_main  # noqa: PLC0415

    return app_main(argv)


def run() -> NoReturn:
    """The console script's entry point. ``memoryhub hook`` takes a short way in: an agent starts a
    process per event and waits for the context hooks' answer, so they load neither the whole
    command line nor the HTTP client library (``hooks.parse`` hands anything unusual back to it)."""
    args = sys.argv[1:]
    if args[:1] == ["hook"]:
        from memoryhub_client.cli import hooks  # noqa: PLC0415

        parsed = hooks.parse(args[1:])
        if parsed is not None:
            answer = hooks.run(*parsed, sys.stdin.read())
            try:
                sys.stdout.write(answer)
                sys.stdout.flush()
            finally:
                # Out without the interpreter's teardown (a few ms of the agent's wait): the answer
                # is written, the log file closed, and no hook leaves anything else to finish.
                os._exit(0)
    from memoryhub_client.cli.app import run as app_run  # noqa: PLC0415

    app_run()


__all__ = ["main", "run"]

#!/usr/bin/env python
"""Django's command-line utility for MemoryHub."""

from __future__ import annotations

import os
import sys

# Commands that never touch the database or the broker: they do not start embedded servers.
NO_SERVERS = {"help", "version", "check", "collectstatic", "diffsettings", "makemessages", "compilemessages"}


def needs_servers(argv: list[str]) -> bool:
    command = argv[1] if len(argv) > 1 else "help"
    return not command.startswith("-") and command not in NO_SERVERS


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    from django.core.management import execute_from_command_line

    from common.config import load_settings

    load_settings()
    started = needs_servers(sys.argv)
    if started:
        from serving import embedded

        embedded.start_servers()
    try:
        execute_from_command_line(sys.argv)
    finally:
        # A one-shot command (make bench, drills, load) stops what it started, whatever its
        # exit status; the status itself passes through (SystemExit is re-raised).
        from django.conf import settings

        if started and settings.MEMORYHUB_STOP_SERVERS:
            embedded.stop_started_servers()

"""python manage.py export --project <slug> [--user <id>] [--conversations] > file.jsonl (integrations/transfer.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.transfer import export_lines
from memories.models import Project


class Command(BaseCommand):
    help = "Write a project's memories (every version, revisions, links; conversations optional) as JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--user", default=None, help="only this end user's memories")
        parser.add_argument("--conversations", action="store_true", help="include conversations and messages")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        for line in export_lines(project=project, user_id=options["user"], conversations=options["conversations"]):
            self.stdout.write(line)

"""python manage.py import --project <slug> file.jsonl: all lines or none (integrations/transfer.py)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.transfer import import_lines
from memories.models import Project


class Command(BaseCommand):
    help = "Import an export file into a project; validates every line first, then writes in one transaction."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("file", help="the JSON lines file, or - for standard input")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        if options["file"] == "-":
            result = import_lines(project=project, lines=sys.stdin)
        else:
            with open(options["file"], encoding="utf-8") as handle:
                result = import_lines(project=project, lines=handle)
        self.stdout.write(json.dumps({"project": project.slug, **result.as_dict()}))
        if result.rejected:
            raise CommandError(f"{len(result.rejected)} line(s) rejected; nothing imported")

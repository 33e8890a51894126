"""python manage.py erase_user --project <slug> --user <id>: erase one end user (memoryhub/erasure.py)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.models import Project
from memoryhub.erasure import erase_user


class Command(BaseCommand):
    help = "Erase one end user of a project (memories, conversations, jobs, logs, scratchpad, caches); prints counts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--user", required=True, help="the end user's id, exactly as stored")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        if not options["yes"]:
            answer = input(f"Erase everything of user {options['user']!r} in {project.slug}? Type 'erase': ")
            if answer.strip() != "erase":
                raise CommandError("not erased")
        counts = erase_user(project=project, user_id=options["user"])
        self.stdout.write(json.dumps({"project": project.slug, "user_id": options["user"], "erased": counts}))

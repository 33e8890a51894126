"""python manage.py create_api_key --project <slug>: prints the new key as the last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memories import services


class Command(BaseCommand):
    help = "Create an API key for a project (creating the project if missing). The key is the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--team", help="team slug for a new project (default: the project slug)")
        parser.add_argument("--name", default="", help="a label for the key")

    def handle(self, *args: Any, **options: Any) -> None:
        project = services.project_get_or_create(slug=options["project"], team_slug=options["team"])
        key, plain = services.api_key_create(project=project, name=options["name"])
        self.stderr.write(f"Created key {key.prefix}… for project {project.slug}. It is shown once:")
        self.stdout.write(plain)

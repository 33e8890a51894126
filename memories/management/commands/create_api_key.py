"""python manage.py create_api_key --project <slug>: prints the new key as the last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.errors import Conflict, NotFound
from memories import tenancy
from memories.models import Membership, Role


class Command(BaseCommand):
    help = "Create an API key for a project (creating the project if missing). The key is the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--team", help="team slug for a new project (default: the project slug)")
        parser.add_argument("--name", default="", help="a label for the key")
        parser.add_argument("--admin", help="username of a person to make an admin of the project's team")

    def handle(self, *args: Any, **options: Any) -> None:
        project = tenancy.project_get_or_create(slug=options["project"], team_slug=options["team"])
        if options["admin"]:
            try:
                tenancy.membership_add(team=project.team, username=options["admin"], role=Role.ADMIN)
            except NotFound as error:
                raise CommandError(error.message) from error
            except Conflict:
                pass  # already a member: their role stays as the team's admins set it
        key, plain = tenancy.api_key_create(project=project, name=options["name"])
        self.stderr.write(f"Created key {key.prefix}… for project {project.slug}. It is shown once:")
        if not Membership.objects.filter(team=project.team).exists():
            self.stderr.write(
                f"In the web UI only superusers see {project.slug} until its team ({project.team.slug}) has a "
                "member: pass --admin <username>, or add people from a superuser's Members page."
            )
        self.stdout.write(plain)

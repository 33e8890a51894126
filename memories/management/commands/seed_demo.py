"""Create the demo workspace into an empty database (``make run`` calls this on every start).

It seeds only a database without any project, and creates a login of its own: it never
changes an existing user (a real database with an ``admin`` keeps its password and keys).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from memories import demo, edges, services, tenancy
from memories.models import Membership, Project, Role, Status

ACTOR = "system:demo"


class Command(BaseCommand):
    help = "Create the demo team, project, admin login, API key and memories (into an empty database only)."

    def handle(self, *args: Any, **options: Any) -> None:
        credentials = settings.MEMORYHUB_HOME / "demo-credentials.txt"
        if Project.objects.exists():
            if credentials.exists() and Project.objects.filter(slug="demo").exists():
                self.stdout.write(credentials.read_text())
            else:
                self.stdout.write(
                    "The database has projects already: no demo seeded. "
                    "Create a key with `manage.py create_api_key --project <slug>`."
                )
            return
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.create_user(
            username=_free_username(), password=password, is_staff=True, is_superuser=True
        )
        project = tenancy.project_get_or_create(slug="demo", team_slug="demo")
        tenancy.project_settings_update(project=project, changes={"retrieval_rate_limit": demo.DEMO_RATE_LIMIT})
        Membership.objects.create(team=project.team, user=user, role=Role.ADMIN)
        _, key = tenancy.api_key_create(project=project, name="demo", created_by=user)
        text = (
            f"Demo login:  {user.get_username()} / {password}\n"
            f"Demo API key (project 'demo', user_id 'demo-user'):\n{key}\n"
        )
        credentials.parent.mkdir(parents=True, exist_ok=True)
        credentials.touch(mode=0o600)
        credentials.chmod(0o600)
        credentials.write_text(text)
        self._memories(project)
        self.stdout.write(text)

    def _memories(self, project: Any) -> None:
        def draft(item: tuple[str, str, str, str]) -> services.MemoryDraft:
            content, kind, category, scope = item
            return services.MemoryDraft(user_id="demo-user", content=content, kind=kind, category=category, scope=scope)

        made = [
            services.memory_create(project=project, draft=draft(item), actor=ACTOR, embed_inline=False)
            for item in demo.DEMO_MEMORIES
        ]
        for index, content in demo.DEMO_SUPERSEDES:
            old = made[index]
            successor = draft((content, old.kind, old.category, old.scope))
            services.memory_supersede(memory=old, draft=successor, actor=ACTOR, reason="demo")
        for source, target, relationship in demo.DEMO_LINKS:
            edges.edge_link(source=made[source], target=made[target], relationship=relationship, actor=ACTOR)
        for item in demo.DEMO_PENDING:
            services.memory_create(
                project=project,
                draft=draft(item),
                actor="classifier:demo",
                status=Status.PENDING_REVIEW,
                embed_inline=False,
            )


def _free_username() -> str:
    """``admin``, or ``demo-admin-…`` when a user of that name exists (it is left alone)."""
    users = get_user_model().objects
    if not users.filter(username="admin").exists():
        return "admin"
    return f"demo-admin-{secrets.token_hex(3)}"

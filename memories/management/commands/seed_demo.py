"""Create the demo workspace once (``make run`` calls this on every start)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from memories import demo, services
from memories.models import Membership, Role, Status
from memoryhub import embedded

ACTOR = "system:demo"


class Command(BaseCommand):
    help = "Create the demo team, project, admin login, API key and memories (once)."

    def handle(self, *args: Any, **options: Any) -> None:
        credentials = embedded.home() / "demo-credentials.txt"
        project = services.project_get_or_create(slug="demo", team_slug="demo")
        if project.memories.exists() and credentials.exists():
            self.stdout.write(credentials.read_text())
            return
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        user.set_password(password)
        user.save()
        Membership.objects.get_or_create(team=project.team, user=user, defaults={"role": Role.ADMIN})
        _, key = services.api_key_create(project=project, name="demo", created_by=user)
        if not project.memories.exists():
            self._memories(project)
        text = (
            "Demo login:  admin / " + password + "\nDemo API key (project 'demo', user_id 'demo-user'):\n" + key + "\n"
        )
        credentials.write_text(text)
        credentials.chmod(0o600)
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
            services.edge_link(source=made[source], target=made[target], relationship=relationship, actor=ACTOR)
        for item in demo.DEMO_PENDING:
            services.memory_create(
                project=project,
                draft=draft(item),
                actor="classifier:demo",
                status=Status.PENDING_REVIEW,
                embed_inline=False,
            )

"""`make run`'s demo seeding only fills an empty database and never touches an existing user."""

from __future__ import annotations

import io

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from memories import tenancy
from memories.models import ApiKey, Project


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_a_database_with_projects_is_left_alone_with_its_admin(db, settings, tmp_path):
    settings.MEMORYHUB_HOME = tmp_path
    admin = get_user_model().objects.create_superuser("admin", password="their-own-password")
    tenancy.project_get_or_create(slug="prod-agent", team_slug="prod")
    keys = ApiKey.objects.count()
    assert "no demo seeded" in seed()
    admin.refresh_from_db()
    assert admin.check_password("their-own-password")
    assert (ApiKey.objects.count(), Project.objects.filter(slug="demo").exists()) == (keys, False)
    assert not (tmp_path / "demo-credentials.txt").exists()


def test_an_empty_database_gets_the_demo_with_a_login_of_its_own(db, settings, tmp_path):
    settings.MEMORYHUB_HOME = tmp_path
    admin = get_user_model().objects.create_superuser("admin", password="their-own-password")
    printed = seed()
    admin.refresh_from_db()
    assert admin.check_password("their-own-password")
    credentials = (tmp_path / "demo-credentials.txt").read_text()
    assert printed == credentials
    login = credentials.split("Demo login:")[1].split("/")[0].strip()
    assert login.startswith("demo-admin-")
    key = credentials.strip().splitlines()[-1]
    response = Client().get("/api/v1/memories", {"user_id": "demo-user"}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    assert response.json()["items"]
    assert seed() == credentials  # the next start prints the same login, mints nothing
    assert ApiKey.objects.count() == 1


def test_the_demo_workspace_is_not_rate_limited_by_hand_and_settings_say_why(db, settings, tmp_path):
    settings.MEMORYHUB_HOME = tmp_path
    key = seed().strip().splitlines()[-1]
    demo = Project.objects.get(slug="demo")
    assert demo.retrieval_rate_limit >= 300  # well above clicking through the playground and the API docs
    assert tenancy.project_get_or_create(slug="prod-agent", team_slug="prod").retrieval_rate_limit == 10
    headers = {"Authorization": f"Bearer {key}"}
    for _ in range(12):
        body = {"user_id": "demo-user", "query": "which editor?"}
        answer = Client().post("/api/v1/retrieve", body, content_type="application/json", headers=headers).json()
        assert "rate_limited" not in answer["degraded"]
    admin = get_user_model().objects.get(username="admin")
    client = Client()
    client.force_login(admin)
    page = client.get("/p/demo/settings/").content.decode()
    assert f"demo workspace starts at {demo.retrieval_rate_limit}" in page and "default of 10" in page

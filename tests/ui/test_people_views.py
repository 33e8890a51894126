"""People and projects: creating a person from Members with a one-time
set-password link, who sees a project made by create_api_key, and home's counts."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from memories.models import Membership, Status

NEW_PASSWORD = "a long new passphrase 42"


def _invite_link(response) -> str:
    found = re.search(
        r'value="(http://testserver/accounts/set-password/[^"]+)" id="invite-url"', response.content.decode()
    )
    assert found, "no set-password link on the page"
    return found.group(1).removeprefix("http://testserver")


def test_an_admin_creates_a_person_who_sets_a_password_once_and_signs_in(client_as, project):
    response = client_as("admin").post(
        f"/p/{project.slug}/members/new/", {"new_username": "carol", "new_role": "reviewer"}
    )
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    carol = get_user_model().objects.get(username="carol")
    assert not carol.has_usable_password()
    assert Membership.objects.get(team=project.team, user=carol).role == "reviewer"
    link, visitor = _invite_link(response), Client()
    form_url = visitor.get(link)["Location"]  # Django swaps the token into the session first
    done = visitor.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/accounts/login/"
    assert Client().login(username="carol", password=NEW_PASSWORD)
    assert "does not work any more" in Client().get(link, follow=True).content.decode()


@pytest.mark.parametrize("username", ["reviewer-person", "no spaces please", ""])
def test_creating_an_existing_or_malformed_username_answers_422(client_as, project, person, username):
    person("reviewer")
    client = client_as("admin")
    response = client.post(f"/p/{project.slug}/members/new/", {"new_username": username, "new_role": "viewer"})
    assert response.status_code == 422
    assert 'class="error"' in response.content.decode()


def test_only_an_admin_creates_people(client_as, project):
    response = client_as("reviewer").post(
        f"/p/{project.slug}/members/new/", {"new_username": "eve", "new_role": "admin"}
    )
    assert response.status_code == 403
    assert not get_user_model().objects.filter(username="eve").exists()


def test_a_project_made_by_create_api_key_is_seen_by_superusers_and_its_admin_not_others(client, db):
    User = get_user_model()
    root = User.objects.create_superuser("root", password="x-long-password-1")
    dana, stranger = User.objects.create_user("dana"), User.objects.create_user("stranger")
    call_command("create_api_key", "--project", "side-bot", stdout=io.StringIO(), stderr=io.StringIO())
    call_command(
        "create_api_key", "--project", "ops-bot", "--admin", "dana", stdout=io.StringIO(), stderr=io.StringIO()
    )
    seen = {}
    for user in (root, dana, stranger):
        client.force_login(user)
        home = client.get("/").content.decode()
        seen[user.username] = {slug for slug in ("side-bot", "ops-bot") if f'id="project-{slug}"' in home}
        seen[user.username + "/dashboard"] = client.get("/p/side-bot/").status_code
    assert seen["root"] == {"side-bot", "ops-bot"} and seen["root/dashboard"] == 200
    assert seen["dana"] == {"ops-bot"} and seen["dana/dashboard"] == 404
    assert seen["stranger"] == set() and seen["stranger/dashboard"] == 404


def test_create_api_key_refuses_an_unknown_admin(db):
    with pytest.raises(CommandError, match="no user named"):
        call_command("create_api_key", "--project", "x-bot", "--admin", "nobody", stdout=io.StringIO())


def test_home_shows_each_projects_counts_and_the_review_backlog(client_as, project, memory_factory):
    for i in range(3):
        memory_factory(f"Active {i}.")
    memory_factory("Archived.", status=Status.ARCHIVED)
    for i in range(2):
        memory_factory(f"Pending {i}.", status=Status.PENDING_REVIEW)
    page = client_as("viewer").get("/").content.decode()
    row = page[page.index(f'id="project-{project.slug}"') :]
    assert re.search(r'class="active-count">3<', row)
    assert re.search(r'class="pending-count"><a href="/p/acme-agent/review/">2</a>', row)
    assert re.search(r'<strong id="backlog-total">2</strong>', page)


def test_a_lost_link_is_replaced_only_while_no_password_is_set(client_as, project, person):
    client = client_as("admin")
    client.post(f"/p/{project.slug}/members/new/", {"new_username": "gina", "new_role": "viewer"})
    gina = Membership.objects.get(team=project.team, user__username="gina")
    again = client.post(f"/p/{project.slug}/members/links/{gina.pk}/")
    assert again.status_code == 200 and again["Cache-Control"] == "no-store"
    assert _invite_link(again).startswith("/accounts/set-password/")
    settled = Membership.objects.get(team=project.team, user=person("viewer"))
    assert client.post(f"/p/{project.slug}/members/links/{settled.pk}/").status_code == 302  # refused
    assert (
        "New password link"
        not in client.get(f"/p/{project.slug}/members/").content.decode().split("viewer-person")[1].split("</tr>")[0]
    )

"""Export and import from the UI: the same file and code as the API."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from memories import tenancy
from memories.models import Memory


def _upload(client, slug, content: bytes):
    return client.post(f"/p/{slug}/transfer/", {"file": SimpleUploadedFile("export.jsonl", content)})


def test_an_admin_exports_and_imports_into_another_project_of_the_team(client_as, project, memory_factory):
    for i in range(3):
        memory_factory(f"Exported memory {i}.")
    client = client_as("admin")
    response = client.get(f"/p/{project.slug}/transfer/export/", {"conversations": "on"})
    assert response.status_code == 200 and 'filename="acme-agent.jsonl"' in response["Content-Disposition"]
    lines = [json.loads(line) for line in response.content.decode().splitlines()]
    assert lines[0]["type"] == "header" and sum(line["type"] == "memory" for line in lines) == 3
    twin = tenancy.project_get_or_create(slug="acme-twin", team_slug="acme")
    first = _upload(client, twin.slug, response.content)
    assert first.status_code == 200 and 'id="import-done"' in first.content.decode()
    assert Memory.objects.filter(project=twin).count() == 3
    again = _upload(client, twin.slug, response.content).content.decode()
    assert "<dt>Skipped (already here)</dt><dd>3</dd>" in again
    assert Memory.objects.filter(project=twin).count() == 3


def test_a_file_with_a_bad_line_imports_nothing_and_names_the_line(client_as, project):
    header = json.dumps({"type": "header", "format": "memoryhub-export", "version": 1})
    response = _upload(client_as("admin"), project.slug, f"{header}\n{{not json\n".encode())
    assert response.status_code == 422
    page = response.content.decode()
    assert "1 line of export.jsonl rejected; nothing was imported" in page
    assert "<tr><td>2</td>" in page and "not JSON" in page
    assert not Memory.objects.filter(project=project).exists()


def test_a_file_that_is_not_text_answers_422(client_as, project):
    response = _upload(client_as("admin"), project.slug, b"\xff\xfe\x00binary")
    assert response.status_code == 422 and "not UTF-8 text" in response.content.decode()


def test_only_admins_reach_export_and_import(client_as, project):
    reviewer = client_as("reviewer")
    assert reviewer.get(f"/p/{project.slug}/transfer/").status_code == 403
    assert reviewer.get(f"/p/{project.slug}/transfer/export/").status_code == 403

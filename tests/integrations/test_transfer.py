"""Export / import (integrations/transfer.py): lossless round trip, idempotent, all or nothing."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from integrations.transfer import export_lines, import_lines
from memories import tenancy
from memories.models import Memory, MemoryEdge, MemoryRevision


def build_history(api) -> None:
    """Chains, links, edits, archive and delete, two users and a conversation, through the API."""
    first = api.post("/memories", {"user_id": "alice", "content": "Alice keeps bees.", "category": "user-facts"}).json()
    second = api.post(
        "/memories",
        {"user_id": "alice", "content": "Alice sells honey.", "related": [{"id": first["id"]}], "importance": 0.9},
    ).json()
    api.patch(f"/memories/{first['id']}", {"user_id": "alice", "content": "Alice keeps two hives."})
    newer = api.post(
        f"/memories/{second['id']}/supersede", {"user_id": "alice", "content": "Alice sells honey online."}
    ).json()
    api.post(f"/memories/{newer['id']}/supersede", {"user_id": "alice", "content": "Alice sells honey at markets."})
    gone = api.post("/memories", {"user_id": "alice", "content": "Alice once lived in Oslo.", "metadata": {"t": 1}})
    api.delete(f"/memories/{gone.json()['id']}", user_id="alice")
    api.post("/memories", {"user_id": "bob", "content": "Bob writes Go.", "scope": "project", "kind": "decision"})
    conversation = api.post("/conversations", {"user_id": "alice"}).json()["id"]
    said = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    assert api.post(f"/conversations/{conversation}/messages", {"user_id": "alice", "messages": said}).status_code < 300


def export(project, **options) -> list[str]:
    return list(export_lines(project=project, conversations=True, **options))


@pytest.mark.django_db(transaction=True)
def test_round_trip_is_lossless_and_idempotent(api, other_project) -> None:
    build_history(api)
    original = export(api.project)
    kinds = [json.loads(line)["type"] for line in original]
    assert kinds.count("memory") == 6 and kinds.count("link") >= 1 and kinds.count("conversation") == 1
    chained = [json.loads(line) for line in original if '"supersedes": "' in line]
    assert len(chained) == 2

    result = import_lines(project=other_project, lines=original)
    assert not result.rejected
    assert result.memories == 6 and result.conversations == 1 and result.messages == 2
    assert export(other_project) == original

    again = import_lines(project=other_project, lines=original)
    assert again.memories == again.links == again.revisions == again.conversations == 0
    assert again.skipped == len(original) - 1
    assert export(other_project) == original
    assert Memory.objects.filter(project=other_project).count() == 6


@pytest.mark.django_db(transaction=True)
def test_export_of_one_user_and_import_into_the_same_project_adds_nothing(api) -> None:
    build_history(api)
    alice = export(api.project, user_id="alice")
    assert {json.loads(line).get("user_id", "alice") for line in alice[1:]} == {"alice"}
    before = (Memory.objects.count(), MemoryRevision.objects.count(), MemoryEdge.objects.count())
    result = import_lines(project=api.project, lines=alice)
    assert result.memories == 0 and not result.rejected
    assert (Memory.objects.count(), MemoryRevision.objects.count(), MemoryEdge.objects.count()) == before


@pytest.mark.django_db(transaction=True)
def test_bad_lines_are_all_reported_and_nothing_is_written(api, other_project) -> None:
    build_history(api)
    lines = export(api.project)
    memory = json.loads(lines[1])
    broken = [
        *lines,
        "not json",
        json.dumps({**memory, "id": "x1", "importance": 3}),
        json.dumps({**memory, "id": "x2", "status": "lost"}),
        json.dumps({**memory, "id": "x3", "supersedes": "nowhere"}),
        json.dumps({**memory, "id": "x4", "category": "astrology"}),
        json.dumps(
            {
                "type": "link",
                "from": "x1",
                "to": "ghost",
                "relationship": "related",
                "created_by": "t",
                "created_at": memory["created_at"],
            }
        ),
        json.dumps({"type": "spaceship"}),
    ]
    result = import_lines(project=other_project, lines=broken)
    reasons = {r.line: r.reason for r in result.rejected}
    first_bad = len(lines) + 1
    assert sorted(reasons) == list(range(first_bad, first_bad + 7))
    assert "not JSON" in reasons[first_bad]
    assert "importance" in reasons[first_bad + 1]
    assert "status" in reasons[first_bad + 2]
    assert "nowhere" in reasons[first_bad + 3]
    assert "astrology" in reasons[first_bad + 4]
    assert "ghost" in reasons[first_bad + 5]
    assert "spaceship" in reasons[first_bad + 6]
    assert result.memories == 0
    assert Memory.objects.filter(project=other_project).count() == 0


@pytest.mark.django_db(transaction=True)
def test_commands_export_and_import(api, tmp_path) -> None:
    build_history(api)
    out = io.StringIO()
    call_command("export", "--project", api.project.slug, "--conversations", stdout=out)
    path = tmp_path / "acme.jsonl"
    path.write_text(out.getvalue())
    tenancy.project_get_or_create(slug="acme-copy", team_slug="acme")
    report = io.StringIO()
    call_command("import", "--project", "acme-copy", str(path), stdout=report)
    assert json.loads(report.getvalue())["imported"]["memories"] == 6
    again = io.StringIO()
    call_command("export", "--project", "acme-copy", "--conversations", stdout=again)
    assert again.getvalue() == out.getvalue()
    path.write_text(out.getvalue() + '{"type": "memory"}\n')
    with pytest.raises(CommandError, match="rejected"):
        call_command("import", "--project", "acme-copy", str(path), stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_api_export_and_import(api, other_api) -> None:
    build_history(api)
    response = api.client.get("/api/v1/export?conversations=true", headers=api._headers())
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    body = b"".join(response.streaming_content).decode()
    assert body.splitlines() == export(api.project)

    def post(text: str | bytes, key: str = other_api.key):
        return other_api.client.post(
            "/api/v1/import", text, content_type="application/x-ndjson", headers={"Authorization": f"Bearer {key}"}
        )

    imported = post(body)
    assert imported.status_code == 200, imported.content
    assert imported.json()["imported"]["memories"] == 6
    assert post(body).json()["imported"]["memories"] == 0
    again = other_api.client.get("/api/v1/export?conversations=true", headers=other_api._headers())
    assert b"".join(again.streaming_content).decode() == body

    rejected = post(body + "{broken\n")
    assert rejected.status_code == 422
    error = rejected.json()["error"]
    assert error["code"] == "import_rejected" and error["details"][0]["line"] == len(body.splitlines()) + 1
    assert post(b"\xff\xfe").json()["error"]["code"] == "import_rejected"
    assert post("").status_code == 422
    assert post(body, key="mh_wrong").status_code == 401
    # A user filter only exports that user's rows.
    bob = api.client.get("/api/v1/export?user_id=bob", headers=api._headers())
    assert len(b"".join(bob.streaming_content).decode().splitlines()) == 2

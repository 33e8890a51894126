"""``manage.py mcp`` over stdio: a real subprocess on the test database, driven by the SDK's
own client (as Claude Desktop or any MCP host starts it)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from memories.models import MemoryRevision
from tests.support.celery_worker import worker_env
from tests.support.mcp_client import ROOT, answer, error_code, run, stdio_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_key_and_a_user_serve_every_tool_for_that_user(api, make_memory):
    theirs = make_memory(user_id="mallory", content="Mallory keeps her keys in the car.")

    async def conversation() -> dict[str, Any]:
        async with stdio_client("--key", api.key, "--user", "alice") as client:
            tools = (await client.list_tools()).tools
            added = await client.call_tool("add_memory", {"content": "Alice lives in Lyon.", "category": "user-facts"})
            memory_id = added.structured_content["id"]
            return {
                "tools": tools,
                "added": added,
                "query": await client.call_tool("query_memory", {"query": "where does alice live?"}),
                "listed": await client.call_tool("list_memories", {}),
                "updated": await client.call_tool("update_memory", {"memory_id": memory_id, "importance": 0.8}),
                "superseded": await client.call_tool(
                    "supersede_memory", {"memory_id": memory_id, "content": "Alice lives in Lille."}
                ),
                "captured": await client.call_tool(
                    "capture_conversation",
                    {"trigger": "turn", "messages": [{"role": "user", "content": "I moved to Lille."}]},
                ),
                "put": await client.call_tool("scratchpad_put", {"key": "plan", "value": [1, 2]}),
                "got": await client.call_tool("scratchpad_get", {"key": "plan"}),
                "bad": await client.call_tool("add_memory", {"content": "x", "importance": 7}),
                "theirs": await client.call_tool("forget_memory", {"memory_id": theirs["id"]}),
                "as_mallory": await client.call_tool("list_memories", {"user_id": "mallory"}),
            }

    got = run(conversation)
    assert len(got["tools"]) == 9
    assert all("user_id" not in tool.input_schema["properties"] for tool in got["tools"])
    added = answer(got["added"])
    assert added["user_id"] == "alice" and added["embedding_status"] == "ready"
    assert [m["id"] for m in answer(got["query"])["memories"]] == [added["id"]]
    assert "Alice lives in Lyon." in answer(got["query"])["injection"]
    assert [m["id"] for m in answer(got["listed"])["items"]] == [added["id"]]
    assert answer(got["updated"])["importance"] == 0.8
    assert answer(got["superseded"])["supersedes"] == added["id"]
    job_id = answer(got["captured"])["job_id"]
    assert api.get(f"/capture/{job_id}", user_id="alice").json()["user_id"] == "alice"
    assert answer(got["got"])["value"] == [1, 2] == answer(got["put"])["value"]
    assert error_code(got["bad"]) == "validation_error"
    assert error_code(got["theirs"]) == "not_found"
    assert error_code(got["as_mallory"]) == "user_fixed"
    assert api.get(f"/memories/{theirs['id']}", user_id="mallory").json()["status"] == "active"


def test_a_project_slug_acts_in_that_project_only(api, other_api, make_memory):
    make_memory(user_id="alice", content="Alice lives in Lyon.")

    async def conversation() -> tuple[Any, Any]:
        async with stdio_client("--project", other_api.project.slug) as client:
            listed = await client.call_tool("list_memories", {"user_id": "alice"})
            added = await client.call_tool(
                "add_memory", {"user_id": "alice", "content": "Alice is in the rival's project."}
            )
            return listed, added

    listed, added = run(conversation)
    assert answer(listed)["items"] == []
    memory_id = answer(added)["id"]
    assert other_api.get(f"/memories/{memory_id}", user_id="alice").status_code == 200
    assert api.get(f"/memories/{memory_id}", user_id="alice").status_code == 404
    assert MemoryRevision.objects.get(memory_id=memory_id).actor == "system:mcp-stdio"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--key", "mh_00000000_not-a-key"], "unknown or revoked API key"),
        (["--project", "no-such-project"], "no project 'no-such-project'"),
        (["--key", "k", "--project", "p"], "not allowed with argument"),
    ],
)
def test_a_wrong_key_or_project_refuses_to_start(db, args, message):
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "mcp", *args],
        env=worker_env(),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert message in done.stderr
    assert done.stdout == ""


def test_the_command_builds_the_query_session_beside_the_handshake(api, monkeypatch):
    """The int8 query session loads on a thread of its own as the server starts, not in the first search."""
    import threading

    from django.core.management import call_command

    from integrations.management.commands import mcp
    from retrieval.embedding.embedders import embedder_for_model, reset_embedder_cache
    from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME

    reset_embedder_cache(include_local=True)  # a fresh process: no session loaded yet
    monkeypatch.setattr(mcp.anyio, "run", lambda *args: None)  # no stdio to serve here

    call_command("mcp", "--key", api.key)

    for thread in [t for t in threading.enumerate() if t.name == "warm-queries"]:
        thread.join(timeout=60)
    assert (1, True) in embedder_for_model(LOCAL_MODEL_NAME)._loaded

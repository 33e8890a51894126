"""The MCP server over streamable HTTP at /mcp/, driven by the SDK's own client against the
live test server: every tool, the API's error codes, the key, and isolation between users
and between projects."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from integrations.mcp.http import USER_HEADER as USER
from memories.models import Memory, Project
from memories.schemas import MemoryIn
from profiles import services
from tests.support.mcp_client import answer, error_code, http_client, run

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "query_memory",
    "add_memory",
    "update_memory",
    "supersede_memory",
    "forget_memory",
    "list_memories",
    "capture_conversation",
    "scratchpad_get",
    "scratchpad_put",
}


@pytest.fixture
def mcp_url(live_server: Any) -> str:
    return f"{live_server.url}/mcp/"


def calls(url: str, key: str, script: list[tuple[str, dict[str, Any]]], *, user: str | None = None) -> list[Any]:
    """Call each (tool, arguments) in one MCP session; the raw results, in order."""

    async def conversation() -> list[Any]:
        async with http_client(url, key=key, user=user) as client:
            return [await client.call_tool(name, arguments) for name, arguments in script]

    return run(conversation)


def test_tools_are_listed_with_the_api_schemas(mcp_url, api):
    async def conversation() -> Any:
        async with http_client(mcp_url, key=api.key) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(conversation)}
    assert set(tools) == TOOLS
    assert tools["add_memory"].input_schema == MemoryIn.model_json_schema()
    assert "user_id" in tools["query_memory"].input_schema["required"]


def test_a_user_header_takes_user_id_out_of_every_schema(mcp_url, api):
    async def conversation() -> Any:
        async with http_client(mcp_url, key=api.key, user="alice") as bound:
            tools = (await bound.list_tools()).tools
        async with http_client(mcp_url, key=api.key) as unbound:
            return tools, (await unbound.list_tools()).tools

    bound, unbound = run(conversation)
    for tool in bound:
        assert "user_id" not in tool.input_schema["properties"], tool.name
        assert "user_id" not in tool.input_schema.get("required", []), tool.name
    # The schemas are built once per process: binding one connection must not change another's.
    assert all("user_id" in tool.input_schema["required"] for tool in unbound)


def test_memory_tools_write_through_the_api_services(mcp_url, api):
    added, listed, updated, superseded, forgotten, after = _memory_flow(mcp_url, api.key)
    first = answer(added)
    assert first["content"] == "Alice deploys on Fridays." and first["embedding_status"] == "ready"
    assert [m["id"] for m in answer(listed)["items"]] == [first["id"]]
    assert answer(updated)["importance"] == 0.9
    new = answer(superseded)
    assert (new["version"], new["supersedes"]) == (2, first["id"])
    assert answer(forgotten) == {"id": new["id"], "status": "deleted"}
    # As GET /memories after DELETE: the forgotten version is gone, the version it replaced stays superseded.
    assert [(m["id"], m["status"]) for m in answer(after)["items"]] == [(first["id"], "superseded")]
    revisions = api.get(f"/memories/{first['id']}/history", user_id="alice").json()["revisions"]
    actor = f"api_key:{api.key.split('_')[1]}"
    assert {r["actor"] for r in revisions} == {actor}
    assert Memory.objects.get(pk=new["id"]).status == "deleted"


def _memory_flow(url: str, key: str) -> list[Any]:
    """add -> list -> update -> supersede -> forget -> list, each step using the ids it got."""

    async def conversation() -> list[Any]:
        async with http_client(url, key=key, user="alice") as client:
            added = await client.call_tool(
                "add_memory", {"content": "Alice deploys on Fridays.", "category": "user-facts"}
            )
            memory_id = added.structured_content["id"]
            listed = await client.call_tool("list_memories", {"category": "user-facts"})
            updated = await client.call_tool(
                "update_memory", {"memory_id": memory_id, "importance": 0.9, "reason": "she insists"}
            )
            superseded = await client.call_tool(
                "supersede_memory", {"memory_id": memory_id, "content": "Alice deploys on Thursdays."}
            )
            forgotten = await client.call_tool("forget_memory", {"memory_id": superseded.structured_content["id"]})
            after = await client.call_tool("list_memories", {})
            return [added, listed, updated, superseded, forgotten, after]

    return run(conversation)


def test_query_memory_is_the_retrieve_engine_with_its_injection(mcp_url, api, make_memory):
    make_memory(content="Alice prefers tabs over spaces.")
    make_memory(content="Alice is allergic to peanuts.")
    body = {"user_id": "alice", "query": "tabs or spaces for indentation?", "limit": 1}
    (result,) = calls(mcp_url, api.key, [("query_memory", body)])
    over_http = api.post("/retrieve", body).json()
    got = answer(result)
    assert [m["content"] for m in got["memories"]] == ["Alice prefers tabs over spaces."]
    assert [m["id"] for m in got["memories"]] == [m["id"] for m in over_http["memories"]]
    assert "Alice prefers tabs over spaces." in got["injection"]
    assert got["token_count"] == over_http["token_count"]


def test_query_memory_over_the_rate_limit_is_a_result_that_says_so(mcp_url, api, make_memory):
    make_memory(content="Alice prefers tabs over spaces.")
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=1)
    body = {"user_id": "alice", "query": "tabs or spaces for indentation?"}
    first, over = calls(mcp_url, api.key, [("query_memory", body), ("query_memory", body)])
    assert answer(first)["degraded"] == [] and answer(first)["memories"]
    assert not over.is_error
    assert (answer(over)["memories"], answer(over)["degraded"]) == ([], ["rate_limited"])


def test_scratchpad_and_capture_tools(mcp_url, api):
    put, got, missing, captured = calls(
        mcp_url,
        api.key,
        [
            ("scratchpad_put", {"key": "task/42/plan", "value": {"step": 2}}),
            ("scratchpad_get", {"key": "task/42/plan"}),
            ("scratchpad_get", {"key": "task/43/plan"}),
            (
                "capture_conversation",
                {"trigger": "turn", "messages": [{"role": "user", "content": "Call me Al from now on."}]},
            ),
        ],
        user="alice",
    )
    assert answer(put)["value"] == {"step": 2}
    assert answer(got)["key"] == "task/42/plan" and answer(got)["value"] == {"step": 2}
    assert api.get("/scratchpad/task/42/plan", user_id="alice").json()["value"] == {"step": 2}
    assert error_code(missing) == "not_found"
    job = answer(captured)
    assert job["status"] == "queued"
    assert api.get(f"/capture/{job['job_id']}", user_id="alice").json()["trigger"] == "turn"


# Each bad input over MCP answers the code the HTTP API answers for the same input.
BAD_INPUTS = [
    ("add_memory", {"user_id": "alice", "contnet": "typo"}, "post", "/memories"),
    ("add_memory", {"user_id": "alice", "content": "x", "importance": 5}, "post", "/memories"),
    ("add_memory", {"user_id": "alice", "content": "x", "category": "no-such-category"}, "post", "/memories"),
    ("add_memory", {"user_id": "alice", "content": "x" * 9000}, "post", "/memories"),
    ("query_memory", {"user_id": "alice"}, "post", "/retrieve"),
    ("list_memories", {"user_id": "alice", "cursor": "garbage"}, "get", "/memories"),
    ("scratchpad_put", {"user_id": "alice", "key": "search", "value": 1}, "put", "/scratchpad/search"),
    ("forget_memory", {"user_id": "alice", "memory_id": "not-a-uuid"}, "delete", "/memories/not-a-uuid"),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "path"), BAD_INPUTS)
def test_bad_input_answers_the_api_error_code(mcp_url, api, tool, arguments, method, path):
    (result,) = calls(mcp_url, api.key, [(tool, arguments)])
    if method in ("post", "put"):
        body = {k: v for k, v in arguments.items() if k not in ("key", "memory_id")}
        http = getattr(api, method)(path, body)
    else:
        params = {k: v for k, v in arguments.items() if k not in ("key", "memory_id")}
        http = getattr(api, method)(path, **params)
    assert http.status_code >= 400
    assert error_code(result) == http.json()["error"]["code"]


def test_an_unknown_tool_is_a_protocol_error(mcp_url, api):
    with pytest.raises(MCPError, match="unknown tool"):
        calls(mcp_url, api.key, [("drop_database", {})])


def test_a_wrong_key_is_refused(mcp_url, api, client):
    # The SDK's client reports the 401 as an error response; nothing was listed.
    with pytest.raises(MCPError, match="error response"):
        calls(mcp_url, "mh_00000000_not-a-key", [("list_memories", {"user_id": "alice"})])
    response = client.post("/mcp/", "{}", content_type="application/json", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_another_users_memory_is_not_found(mcp_url, api, make_memory):
    secret = make_memory(user_id="alice", content="Alice's door code is under the mat.")
    ref = {"memory_id": secret["id"]}
    results = calls(
        mcp_url,
        api.key,
        [
            ("update_memory", {**ref, "content": "mallory was here"}),
            ("supersede_memory", {**ref, "content": "mallory was here"}),
            ("forget_memory", ref),
            ("list_memories", {}),
            ("query_memory", {"query": "door code"}),
            ("list_memories", {"user_id": "alice"}),
        ],
        user="mallory",
    )
    assert [error_code(r) for r in results[:3]] == ["not_found"] * 3
    assert answer(results[3])["items"] == []
    assert answer(results[4])["memories"] == []
    assert error_code(results[5]) == "user_fixed"
    assert api.get(f"/memories/{secret['id']}", user_id="alice").json()["content"] == secret["content"]


def test_per_call_users_are_isolated_like_the_api(mcp_url, api, make_memory):
    secret = make_memory(user_id="alice", content="Alice's door code is under the mat.")
    update, listed = calls(
        mcp_url,
        api.key,
        [
            ("update_memory", {"user_id": "mallory", "memory_id": secret["id"], "content": "mallory was here"}),
            ("list_memories", {"user_id": "mallory"}),
        ],
    )
    assert error_code(update) == "not_found"
    assert answer(listed)["items"] == []


def test_another_projects_key_cannot_see_this_projects_memories(mcp_url, api, other_api, make_memory):
    secret = make_memory(user_id="alice", content="Alice's door code is under the mat.")
    listed, found, forgot, queried = calls(
        mcp_url,
        other_api.key,
        [
            ("list_memories", {}),
            ("update_memory", {"memory_id": secret["id"], "importance": 1}),
            ("forget_memory", {"memory_id": secret["id"]}),
            ("query_memory", {"query": "door code"}),
        ],
        user="alice",
    )
    assert answer(listed)["items"] == []
    assert error_code(found) == error_code(forgot) == "not_found"
    assert answer(queried)["memories"] == []
    assert Memory.objects.get(pk=secret["id"]).status == "active"


def test_resources_are_a_users_memories_by_category(mcp_url, api, make_memory):
    fact = make_memory(user_id="alice", content="Alice lives in Lyon.", category="user-facts")
    make_memory(user_id="alice", content="Alice wants short answers.", category="coding-preferences")
    make_memory(user_id="mallory", content="Mallory lives in Paris.", category="user-facts")

    async def conversation() -> Any:
        async with http_client(mcp_url, key=api.key, user="alice") as client:
            listed = (await client.list_resources()).resources
            uri = next(str(r.uri) for r in listed if str(r.uri).endswith("/user-facts"))
            contents = (await client.read_resource(uri)).contents
            with pytest.raises(MCPError) as refused:
                await client.read_resource("memoryhub://users/mallory/memories/user-facts")
            return listed, contents, refused.value

    listed, contents, refused = run(conversation)
    assert len(listed) == len(api.project.taxonomy) + 1  # and the profile
    items = json.loads(contents[0].text)["items"]
    assert [m["id"] for m in items] == [fact["id"]]
    assert refused.error.data["error"]["code"] == "user_fixed"


def test_the_profile_is_a_resource_of_the_connections_user(mcp_url, api, make_memory):
    make_memory(user_id="alice", content="Alice is allergic to peanuts.")
    services.profile_rebuild(project=api.project, user_id="alice")

    async def conversation() -> Any:
        async with http_client(mcp_url, key=api.key, user="alice") as client:
            contents = (await client.read_resource("memoryhub://users/alice/profile")).contents
            with pytest.raises(MCPError) as refused:
                await client.read_resource("memoryhub://users/mallory/profile")
            return contents, refused.value

    contents, refused = run(conversation)
    assert json.loads(contents[0].text)["text"] == "- Alice is allergic to peanuts."
    assert refused.error.data["error"]["code"] == "user_fixed"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_both_protocol_eras_are_served(mcp_url, api, make_memory, mode):
    make_memory(user_id="alice", content="Alice lives in Lyon.")

    async def conversation() -> Any:
        async with http_client(mcp_url, key=api.key, mode=mode) as client:
            return client.protocol_version, await client.call_tool("list_memories", {"user_id": "alice"})

    version, result = run(conversation)
    assert version in (HANDSHAKE_PROTOCOL_VERSIONS if mode == "legacy" else MODERN_PROTOCOL_VERSIONS)
    assert [m["content"] for m in answer(result)["items"]] == ["Alice lives in Lyon."]


MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_refusals_before_any_mcp_message_are_4xx_in_the_envelope(api, client, settings):
    auth = {"Authorization": f"Bearer {api.key}", **MCP_ACCEPT}
    got = client.get("/mcp/", headers=auth)
    assert (got.status_code, got["Allow"], got.json()["error"]["code"]) == (405, "POST", "method_not_allowed")
    long_user = client.post("/mcp/", "{}", content_type="application/json", headers={**auth, USER: "u" * 256})
    assert (long_user.status_code, long_user.json()["error"]["code"]) == (422, "invalid_user_id")
    not_json = client.post("/mcp/", "{not json", content_type="application/json", headers=auth)
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700  # JSON-RPC parse error
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    big = client.post("/mcp/", json.dumps({"x": "a" * 200}), content_type="application/json", headers=auth)
    assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")


def test_concurrent_sessions_of_different_users_stay_apart(mcp_url, api):
    """Eight users at once on the threaded live server: each request's tools run on its own
    thread's connection, so nobody's write or read lands in another's."""
    users = [f"user-{n}" for n in range(8)]
    seen: dict[str, list[str]] = {}

    async def one(user: str) -> None:
        async with http_client(mcp_url, key=api.key, user=user) as client:
            for n in range(3):
                await client.call_tool("add_memory", {"content": f"{user} likes number {n}."})
            listed = await client.call_tool("list_memories", {})
            seen[user] = sorted(m["content"] for m in listed.structured_content["items"])

    async def everyone() -> None:
        async with anyio.create_task_group() as group:
            for user in users:
                group.start_soon(one, user)

    run(everyone)
    assert seen == {user: [f"{user} likes number {n}." for n in range(3)] for user in users}

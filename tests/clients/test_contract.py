"""The client and the API cannot drift: the live server's OpenAPI schema is compared with the
client's operation table, models and method signatures, and a planted change in a copy of
that schema is caught (so the comparison is one that can fail)."""

from __future__ import annotations

import copy
from typing import Any

import httpx2
import pytest
from memoryhub_client.contract import check_schema


@pytest.fixture
def schema(server: str) -> dict[str, Any]:
    # The first request builds the schema: seconds on a busy machine.
    response = httpx2.get(f"{server}/api/v1/openapi.json", timeout=60)
    assert response.status_code == 200
    return dict(response.json())


def test_the_client_agrees_with_the_live_openapi_schema(schema):
    problems = check_schema(schema)
    assert not problems, "the API changed and the client did not:\n" + "\n".join(problems)


def components(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["components"]["schemas"])


def test_a_field_the_api_adds_to_memories_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    components(changed)["MemoryOut"]["properties"]["pinned"] = {"type": "boolean"}
    assert any("'pinned'" in problem and "Memory" in problem for problem in check_schema(changed))


def test_a_renamed_query_field_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    parameters = changed["paths"]["/api/v1/memories"]["get"]["parameters"]
    next(p for p in parameters if p["name"] == "cursor")["name"] = "page_token"
    assert any("list_memories" in problem and "page_token" in problem for problem in check_schema(changed))


def test_a_changed_field_type_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    components(changed)["RetrieveOut"]["properties"]["token_count"] = {"type": "string"}
    assert any("token_count: string in the API, integer in the client" in p for p in check_schema(changed))


def test_a_field_becoming_nullable_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    components(changed)["RetrievedMemoryOut"]["properties"]["score"] = {"anyOf": [{"type": "number"}, {"type": "null"}]}
    assert any(".score: nullable True in the API" in p for p in check_schema(changed))


def test_a_new_required_body_field_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    capture = components(changed)["CaptureIn"]
    capture["properties"]["agent_id"] = {"type": "string"}
    capture["required"].append("agent_id")
    problems = check_schema(changed)
    assert any("capture" in p and "agent_id" in p and "body fields" in p for p in problems)
    assert any("MemoryHub.capture: does not take ['agent_id']" in p for p in problems)


def test_a_new_endpoint_or_a_removed_one_fails_the_check(schema):
    changed = copy.deepcopy(schema)
    changed["paths"]["/api/v1/memories/{memory_id}/pin"] = {"post": {"responses": {"200": {}}}}
    del changed["paths"]["/api/v1/retrieve"]
    problems = check_schema(changed)
    assert (
        "POST /memories/{memory_id}/pin: a new API operation the client neither calls nor lists in NOT_COVERED"
        in problems
    )
    assert "POST /retrieve: the client calls it but the API has no such operation" in problems

"""Does this client still match a server? ``check_schema`` compares the operation table, the
models and both clients' method signatures with the server's OpenAPI schema
(``GET /api/v1/openapi.json``) and lists every difference; an empty list means they agree.

Run it against a server: ``python -m memoryhub_client.contract http://localhost:8000``.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from datetime import datetime
from typing import Any

import httpx2

from memoryhub_client import _core
from memoryhub_client.aio import AsyncMemoryHub
from memoryhub_client.client import MemoryHub
from memoryhub_client.operations import JSON, NOT_COVERED, OPERATIONS, Operation

# JSON Schema type of each Python type a model field may have.
_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    datetime: "string",
}


def check_schema(schema: dict[str, Any]) -> list[str]:
    """Every way the client and ``schema`` disagree, one sentence each."""
    problems = _coverage(schema)
    for name, operation in OPERATIONS.items():
        found = _schema_operation(schema, operation)
        if found is not None:
            problems += _operation(schema, name, operation, found)
        for cls in (MemoryHub, AsyncMemoryHub):
            problems += _signature(schema, cls, name, operation, found)
    return problems


def _paths(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    prefix = _core.API_PREFIX
    return {
        (method.upper(), path.removeprefix(prefix)): spec
        for path, methods in schema.get("paths", {}).items()
        for method, spec in methods.items()
        if isinstance(spec, dict)
    }


def _schema_operation(schema: dict[str, Any], operation: Operation) -> dict[str, Any] | None:
    return _paths(schema).get((operation.method, operation.path))


def _coverage(schema: dict[str, Any]) -> list[str]:
    served = set(_paths(schema))
    called = {(op.method, op.path) for op in OPERATIONS.values()}
    problems = [f"{m} {p}: the client calls it but the API has no such operation" for m, p in sorted(called - served)]
    problems += [
        f"{m} {p}: a new API operation the client neither calls nor lists in NOT_COVERED"
        for m, p in sorted(served - called - set(NOT_COVERED))
    ]
    problems += [f"{m} {p}: listed in NOT_COVERED but gone from the API" for m, p in sorted(set(NOT_COVERED) - served)]
    return problems


def _operation(schema: dict[str, Any], name: str, operation: Operation, found: dict[str, Any]) -> list[str]:
    where = f"{name} ({operation.method} {operation.path})"
    problems: list[str] = []
    parameters = found.get("parameters", [])
    query = {p["name"] for p in parameters if p.get("in") == "query"}
    path = {p["name"] for p in parameters if p.get("in") == "path"}
    if query != set(operation.query):
        problems.append(f"{where}: query fields {sorted(query)} in the API, {sorted(operation.query)} in the client")
    if path != set(operation.path_params):
        problems.append(
            f"{where}: path fields {sorted(path)} in the API, {sorted(operation.path_params)} in the client"
        )
    content = found.get("requestBody", {}).get("content", {})
    if operation.content_type != JSON or not operation.body:
        if operation.body or (content and operation.content_type not in content):
            problems.append(f"{where}: the API takes a body of {sorted(content)}, the client sends {operation.body}")
    else:
        body = _resolve(schema, content.get(JSON, {}).get("schema", {}))
        fields = set(body.get("properties", {}))
        if fields != set(operation.body):
            problems.append(f"{where}: body fields {sorted(fields)} in the API, {sorted(operation.body)} in the client")
    return problems + _response(schema, where, operation, found)


def _response(schema: dict[str, Any], where: str, operation: Operation, found: dict[str, Any]) -> list[str]:
    # Keys are strings in JSON; a schema built in-process (Django's ``get_openapi_schema``) has ints.
    responses = {str(status): answer for status, answer in found.get("responses", {}).items()}
    if str(operation.status) not in responses:
        return [f"{where}: the client expects {operation.status}, the API answers {sorted(responses)}"]
    content = responses[str(operation.status)].get("content") or {}
    if operation.response is None:
        return [f"{where}: the API answers a body the client drops"] if content else []
    if operation.response == "text":
        return [] if any(kind != JSON for kind in content) else [f"{where}: the API no longer answers text"]
    answer = _resolve(schema, content.get(JSON, {}).get("schema", {}))
    if operation.response == "json":
        return [] if answer else [f"{where}: the API answers no JSON"]
    return _model(schema, f"{where} answer", operation.response, answer)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not ref:
        return node
    name = ref.rsplit("/", 1)[-1]
    return dict(schema.get("components", {}).get("schemas", {}).get(name, {}))


def _model(schema: dict[str, Any], where: str, model: type, node: dict[str, Any]) -> list[str]:
    """A model against a schema object: same field names, required ones required, types alike."""
    properties: dict[str, Any] = node.get("properties", {})
    fields = {f.name: f for f in dataclasses.fields(model)}
    problems = []
    if set(properties) != set(fields):
        problems.append(
            f"{where} ({model.__name__}): the API has {sorted(set(properties) - set(fields))} that the model lacks, "
            f"the model has {sorted(set(fields) - set(properties))} that the API lacks"
        )
    required = set(node.get("required", []))
    hints = typing.get_type_hints(model)
    for name in sorted(set(properties) & set(fields)):
        field = fields[name]
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if not has_default and name not in required:
            problems.append(f"{where}.{name}: optional in the API, required by {model.__name__}")
        problems += _field(schema, f"{where}.{name}", hints[name], properties[name])
    return problems


def _field(schema: dict[str, Any], where: str, hint: Any, node: dict[str, Any]) -> list[str]:
    options = [_resolve(schema, option) for option in node.get("anyOf", [node])]
    api_nullable = any(option.get("type") == "null" for option in options)
    options = [option for option in options if option.get("type") != "null"]
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    model_nullable = type(None) in args
    inner = next((arg for arg in args if arg is not type(None)), hint) if args else hint
    if api_nullable != model_nullable:
        return [f"{where}: nullable {api_nullable} in the API, {model_nullable} in the client"]
    if inner is Any or len(options) != 1:
        return []
    option, origin = options[0], typing.get_origin(inner) or inner
    if dataclasses.is_dataclass(origin) and isinstance(origin, type):
        return _model(schema, where, origin, option)
    expected = _JSON_TYPES.get(origin)
    if expected is None or "type" not in option:
        return []
    if option["type"] != expected and not (expected == "number" and option["type"] == "integer"):
        return [f"{where}: {option['type']} in the API, {expected} in the client"]
    if origin is list and typing.get_args(inner):
        return _field(schema, f"{where}[]", typing.get_args(inner)[0], option.get("items", {}))
    return []


def _signature(
    schema: dict[str, Any], cls: type, name: str, operation: Operation, found: dict[str, Any] | None
) -> list[str]:
    """The method a user calls takes every field the operation sends, requires those the API
    requires, and returns the operation's model."""
    method = getattr(cls, name, None)
    if method is None:
        return [f"{cls.__name__}.{name}: missing"]
    parameters = inspect.signature(method).parameters
    needed = set(operation.path_params) | set(operation.query) | set(operation.body)
    required: set[str] = set()
    if found is not None:
        required = {p["name"] for p in found.get("parameters", []) if p.get("required")}
        body = found.get("requestBody", {}).get("content", {}).get(JSON, {}).get("schema", {})
        required |= set(_resolve(schema, body).get("required", []))
    problems = []
    if (needed | required) - set(parameters):
        problems.append(f"{cls.__name__}.{name}: does not take {sorted((needed | required) - set(parameters))}")
    optional = {key for key, p in parameters.items() if p.default is not inspect.Parameter.empty}
    if required & optional:
        problems.append(f"{cls.__name__}.{name}: {sorted(required & optional)} required by the API, optional here")
    returns = typing.get_type_hints(method).get("return")
    expected = {None: type(None), "text": str}.get(operation.response, operation.response)
    if expected != "json" and returns is not expected:
        problems.append(f"{cls.__name__}.{name}: returns {returns}, the operation decodes {expected}")
    return problems


def main(argv: list[str]) -> int:
    """``python -m memoryhub_client.contract BASE_URL``: print the differences; exit 1 if any."""
    schema = httpx2.get(argv[1].rstrip("/") + _core.API_PREFIX + "/openapi.json").json()
    problems = check_schema(schema)
    for problem in problems:
        print(problem)
    print("client and API agree" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""python manage.py bench_mcp: the cost of MCP over HTTP against POST /api/v1/retrieve.

On bench_retrieve's data (the ``bench-retrieve`` project, seeded or reused; 10k memories over
10 users by default) and its gunicorn (configured like ``make run``, on a free loopback port),
the same queries go three ways, one client, one user, HyDE off:

- ``http``: POST /api/v1/retrieve over a kept-alive connection;
- ``mcp_raw``: a JSON-RPC ``tools/call`` of ``query_memory`` POSTed to /mcp/ over a kept-alive
  connection (the server side of MCP: the SDK's transport and dispatch);
- ``mcp_sdk``: the SDK's own client in one session (adds the client's framing and its checks
  of the answer against the tool's output schema).

Every query is first sent once untimed (workers' models, the query-vector cache); then each
query goes all three ways in a rotating order, so a busy moment of a shared machine hits
the three alike. Prints p50/p95/mean per way and whether MCP returned the same memories.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from django.core.management.base import BaseCommand, CommandParser
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from evaluation.harness import Service
from evaluation.management.commands.bench_retrieve import seed
from evaluation.synthetic import synthetic_sentences
from memories import tenancy

USER = "user-0"


class Command(BaseCommand):
    help = "Measure query_memory over MCP (raw JSON-RPC and the SDK client) against POST /retrieve."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--memories", type=int, default=10_000)
        parser.add_argument("--calls", type=int, default=200)

    def handle(self, *args: Any, **options: Any) -> None:
        project = seed(options["memories"], log=self.stderr.write)
        _, key = tenancy.api_key_create(project=project, name="bench-mcp")
        queries = synthetic_sentences(options["calls"], seed=99, tag="q")
        with Service(worker=False, ready="answering") as server:
            report = anyio.run(_measure, server.port, key, queries)
        report.update(memories=project.memories.count(), calls=len(queries), cpus=os.cpu_count())
        self.stdout.write(json.dumps(report, indent=2))


async def _measure(port: int, key: str, queries: list[str]) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as web,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp/", http_client=web)) as client,
    ):
        ways: dict[str, Callable[[dict[str, Any], str], Awaitable[list[str]]]] = {
            "http": _http,
            "mcp_raw": _mcp_raw,
            "mcp_sdk": _mcp_sdk,
        }
        context = {"conn": conn, "key": key, "client": client}
        for query in queries:  # untimed warm-up
            await _http(context, query)
        times: dict[str, list[float]] = {name: [] for name in ways}
        mismatches = 0
        for n, query in enumerate(queries):
            order = list(ways)[n % 3 :] + list(ways)[: n % 3]
            ids = {}
            for name in order:
                started = time.perf_counter()
                ids[name] = await ways[name](context, query)
                times[name].append((time.perf_counter() - started) * 1000)
            mismatches += len({tuple(v) for v in ids.values()}) > 1
    conn.close()
    return {"same_memories_every_call": mismatches == 0, "mismatches": mismatches, **_summary(times)}


def _summary(times: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in times.items():
        cuts = statistics.quantiles(values, n=100)
        out[name] = {
            "p50_ms": round(cuts[49], 2),
            "p95_ms": round(cuts[94], 2),
            "mean_ms": round(statistics.fmean(values), 2),
        }
    for name in ("mcp_raw", "mcp_sdk"):
        out[f"{name}_overhead_p50_ms"] = round(out[name]["p50_ms"] - out["http"]["p50_ms"], 2)
    return out


def _body(query: str) -> dict[str, Any]:
    return {"user_id": USER, "query": query, "hyde": False}


async def _http(context: dict[str, Any], query: str) -> list[str]:
    conn = context["conn"]
    headers = {"Authorization": f"Bearer {context['key']}", "Content-Type": "application/json"}
    conn.request("POST", "/api/v1/retrieve", json.dumps(_body(query)), headers)
    response = conn.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"retrieve answered {response.status}: {answer}")
    return [m["id"] for m in answer["memories"]]


async def _mcp_raw(context: dict[str, Any], query: str) -> list[str]:
    conn = context["conn"]
    headers = {
        "Authorization": f"Bearer {context['key']}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    call = {"name": "query_memory", "arguments": _body(query)}
    conn.request(
        "POST", "/mcp/", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}), headers
    )
    response = conn.getresponse()
    answer = json.loads(response.read())
    if response.status != 200 or "result" not in answer or answer["result"].get("isError"):
        raise RuntimeError(f"MCP answered {response.status}: {answer}")
    return [m["id"] for m in answer["result"]["structuredContent"]["memories"]]


async def _mcp_sdk(context: dict[str, Any], query: str) -> list[str]:
    result = await context["client"].call_tool("query_memory", _body(query))
    if result.is_error:
        raise RuntimeError(f"MCP answered an error: {result.structured_content}")
    return [m["id"] for m in result.structured_content["memories"]]

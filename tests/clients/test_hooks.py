"""``memoryhub hook``: recorded payloads of Claude Code and Gemini CLI, in each documented shape,
piped into the command as the agent would, against the live test server."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from capture.models import CaptureJob
from retrieval.models import RetrievalLog
from tests.support.reframing_gateway import FRAMINGS, ReframingGateway, self_signed

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = Path(__file__).parent / "hook_payloads"
DEPLOY = "The payments service is deployed on Tuesdays, never on Fridays."


def payload(name: str, transcript: Path | None = None) -> str:
    text = (PAYLOADS / f"{name}.json").read_text()
    return text.replace("TRANSCRIPT", str(transcript or "/nonexistent/transcript.jsonl"))


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "transcript.jsonl"
    shutil.copy(PAYLOADS / "claude_code_transcript.jsonl", path)
    return path


def windows(trigger: str = "turn") -> list[list[tuple[str, str]]]:
    jobs = CaptureJob.objects.filter(trigger=trigger).order_by("created_at")
    return [[(m["role"], m["content"]) for m in job.window] for job in jobs]


def worker_took_them() -> None:
    """Mark the queued jobs as started, as a worker would: a queued turn job absorbs the next
    one's window (coalescing), which would hide what each hook run sent."""
    CaptureJob.objects.filter(status="queued").update(status="done")


def context(done: Any, event: str) -> str:
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == event
    return str(answer["additionalContext"])


def test_a_user_prompt_gets_the_relevant_memories_as_additional_context(cli, make_memory, api):
    cli("remember", DEPLOY)
    # The server's first retrieve loads what it needs; the hook's 1 s is for one that is running.
    assert cli("recall", "warm up").returncode == 0
    done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    assert DEPLOY in context(done, "UserPromptSubmit")


def test_session_start_brings_the_projects_memories(cli):
    cli("remember", "--scope", "project", "The payments-service project follows these conventions: ruff, type hints.")
    done = cli("hook", "SessionStart", stdin=payload("claude_code_session_start"))
    assert "ruff, type hints" in context(done, "SessionStart")


def test_a_prompt_with_nothing_relevant_adds_nothing(cli):
    done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_stop_sends_the_conversations_text_once(cli, transcript):
    assert cli("hook", "Stop", stdin=payload("claude_code_stop", transcript)).returncode == 0
    assert windows() == [
        [
            ("user", "From now on we deploy the payments service on Tuesdays, never on Fridays."),
            ("assistant", "Understood: Tuesday deploys. Let me check the pipeline."),
            ("assistant", "The pipeline says Friday; I changed it to Tuesday."),
        ]
    ]
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    assert len(windows()) == 1


def test_the_next_stop_sends_only_the_new_turn_and_compaction_the_rest(cli, transcript):
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    worker_took_them()
    with transcript.open("a") as out:
        out.write(json.dumps({"type": "user", "message": {"role": "user", "content": "Also: no deploys in December."}}))
        out.write("\n")
        out.write('{"type": "assistant", "message": {"role": "assistant", "content": "Noted')  # still being written
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    assert windows()[1] == [("user", "Also: no deploys in December.")]
    with transcript.open("a") as out:
        out.write(' - no December deploys."}}\n')
    cli("hook", "PreCompact", stdin=payload("claude_code_pre_compact", transcript))
    assert windows("compaction") == [[("assistant", "Noted - no December deploys.")]]


def test_a_range_whose_answer_was_lost_is_resent_without_a_second_job(cli, transcript):
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    [state] = (cli.home / ".local" / "state" / "memoryhub" / "claude-code").glob("*.json")
    sent = json.loads(state.read_text())
    state.write_text(json.dumps({"line": 0, "pending": [0, sent["line"]]}))  # the answer never came
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    assert len(windows()) == 1
    assert json.loads(state.read_text()) == {"line": sent["line"], "pending": None}


def test_an_unreachable_server_costs_the_agent_nothing_and_the_turn_waits(cli, transcript):
    live = cli.env["MEMORYHUB_URL"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        cli.env["MEMORYHUB_URL"] = f"http://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    prompt = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    stop = cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    assert time.monotonic() - started < 2 * 2.5
    assert [(d.returncode, d.stdout, d.stderr) for d in (prompt, stop)] == [(0, "", "")] * 2
    assert "UserPromptSubmit failed" in (cli.home / ".local" / "state" / "memoryhub" / "hooks.log").read_text()
    cli.env["MEMORYHUB_URL"] = live
    cli("hook", "Stop", stdin=payload("claude_code_stop", transcript))
    assert len(windows()) == 1 and len(windows()[0]) == 3


def test_a_server_that_never_answers_is_given_up_after_the_hook_timeout(cli):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        cli.env["MEMORYHUB_URL"] = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cli.env["MEMORYHUB_HOOK_TIMEOUT"] = "30"  # asks for more than a hook may take: 2 s it is
        started = time.monotonic()
        done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
        elapsed = time.monotonic() - started
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert 2.0 <= elapsed < 2.0 + 3.0  # the cap, plus starting Python on a busy machine
    assert "timed out" in (cli.home / ".local" / "state" / "memoryhub" / "hooks.log").read_text()


def test_a_payload_that_is_not_json_is_logged_and_ignored(cli):
    done = cli("hook", "UserPromptSubmit", stdin="not json")
    assert (done.returncode, done.stdout) == (0, "")
    assert cli("hook", "PostToolUse", stdin="{}").returncode == 1


def test_gemini_before_agent_and_session_start_answer_in_geminis_shape(cli):
    cli("remember", DEPLOY)
    done = cli("hook", "--agent", "gemini", "BeforeAgent", stdin=payload("gemini_before_agent"))
    assert DEPLOY in context(done, "BeforeAgent")
    start = cli("hook", "--agent", "gemini", "SessionStart", stdin=payload("gemini_session_start"))
    assert start.returncode == 0 and isinstance(json.loads(start.stdout), dict)


def test_gemini_after_agent_captures_the_turn_once(cli):
    for _ in range(2):
        done = cli("hook", "--agent", "gemini", "AfterAgent", stdin=payload("gemini_after_agent"))
        assert (done.returncode, json.loads(done.stdout)) == (0, {})
    assert windows() == [
        [
            ("user", "Remember that I review pull requests every morning at nine."),
            ("assistant", "Noted: you review pull requests every morning at 9:00."),
        ]
    ]


def test_gemini_hooks_print_an_empty_object_when_the_server_is_down(cli):
    cli.env["MEMORYHUB_URL"] = "http://127.0.0.1:9"
    done = cli("hook", "--agent", "gemini", "BeforeAgent", stdin=payload("gemini_before_agent"))
    assert (done.returncode, done.stdout) == (0, "{}")


@pytest.fixture
def remembered(cli: Any) -> None:
    cli("remember", DEPLOY)
    assert cli("recall", "warm up").returncode == 0  # the server's first retrieve loads what it needs


@pytest.mark.parametrize("framing", FRAMINGS)
def test_the_answer_is_read_whole_however_a_gateway_frames_it(cli, remembered, framing):
    gateway = ReframingGateway(cli.env["MEMORYHUB_URL"], framing=framing)
    try:
        cli.env["MEMORYHUB_URL"] = gateway.url()
        done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    finally:
        gateway.close()
    assert DEPLOY in context(done, "UserPromptSubmit")


def test_an_https_server_is_reached_when_its_certificate_is_trusted_and_refused_when_not(cli, remembered, tmp_path):
    certificate, key = self_signed(tmp_path)
    gateway = ReframingGateway(cli.env["MEMORYHUB_URL"], framing="chunked", tls=(certificate, key))
    try:
        cli.env["MEMORYHUB_URL"] = gateway.url("localhost")
        untrusted = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
        cli.env["SSL_CERT_FILE"] = str(certificate)
        trusted = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    finally:
        gateway.close()
    assert (untrusted.returncode, untrusted.stdout) == (0, "")
    assert "CERTIFICATE_VERIFY_FAILED" in (cli.home / ".local" / "state" / "memoryhub" / "hooks.log").read_text()
    assert DEPLOY in context(trusted, "UserPromptSubmit")


def test_an_error_answer_is_logged_as_the_apis_error_without_a_traceback(cli):
    cli.env["MEMORYHUB_API_KEY"] = "mh_00000000_not-a-key"
    done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = (cli.home / ".local" / "state" / "memoryhub" / "hooks.log").read_text()
    assert "UserPromptSubmit failed; the agent goes on without memory: Unauthorized: 401" in log
    assert "Traceback" not in log


def test_a_context_hook_does_not_wait_for_the_llm(cli, remembered, settings, fake_openai, project):
    """HyDE and the judge are LLM calls: a hook has 1 s, and its target is 150 ms (docs/adr/0109)."""
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "k"
    settings.MEMORYHUB_JUDGE = True
    assert project.hyde_enabled
    done = cli("hook", "UserPromptSubmit", stdin=payload("claude_code_user_prompt_submit"))
    assert DEPLOY in context(done, "UserPromptSubmit")
    assert fake_openai.count("/chat/completions") == 0
    assert "hyde" not in RetrievalLog.objects.filter(user_id="alice").latest("created_at").timings

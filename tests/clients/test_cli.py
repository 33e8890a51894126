"""The ``memoryhub`` command line, run as a process against the live test server."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
from pathlib import Path
from uuid import UUID

import pytest

from capture.models import CaptureJob
from memories import tenancy
from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


def test_remember_list_recall_and_forget_a_memory(cli, project):
    remembered = cli("remember", "Alice", "deploys", "on", "Fridays.", "--kind", "fact")
    assert remembered.returncode == 0, remembered.stderr
    memory_id = remembered.stdout.strip()
    assert Memory.objects.get(pk=UUID(memory_id)).content == "Alice deploys on Fridays."
    assert memory_id in cli("list").stdout
    recalled = cli.json("recall", "When does Alice deploy?")
    assert [m["id"] for m in recalled["memories"]] == [memory_id]
    assert "Alice deploys on Fridays." in cli("recall", "When does Alice deploy?").stdout
    assert cli("forget", memory_id).returncode == 0
    assert cli.json("list") == []


def test_remember_reads_standard_input_and_prints_json(cli):
    memory = cli.json("remember", "--category", "coding-preferences", stdin="Alice prefers tabs.\n")
    assert (memory["content"], memory["category"], memory["user_id"]) == (
        "Alice prefers tabs.",
        "coding-preferences",
        "alice",
    )


def test_usage_errors_exit_1(cli):
    assert cli("remember", "x", "--kind", "rumour").returncode == 1
    assert cli().returncode == 1
    del cli.env["MEMORYHUB_USER"]
    unconfigured = cli("list")
    assert unconfigured.returncode == 1 and "MEMORYHUB_USER" in unconfigured.stderr


def test_an_api_error_exits_2_with_the_envelope_on_stderr(cli):
    gone = cli("--json", "forget", "00000000-0000-0000-0000-000000000000")
    assert gone.returncode == 2
    assert json.loads(gone.stderr)["error"] | {"message": ""} == {
        "code": "not_found",
        "message": "",
        "details": None,
        "status": 404,
    }
    cli.env["MEMORYHUB_API_KEY"] = "mh_wrong"
    assert cli("list").returncode == 2


def test_a_server_that_is_not_there_exits_3(cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cli.env["MEMORYHUB_URL"] = f"http://127.0.0.1:{port}"
    unreachable = cli("list")
    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr


def test_login_saves_a_private_config_that_the_environment_overrides(cli, key, server):
    for name in ("MEMORYHUB_URL", "MEMORYHUB_API_KEY", "MEMORYHUB_USER"):
        del cli.env[name]
    saved = cli("login", "--url", server, "--api-key", key, "--user", "bob")
    assert saved.returncode == 0, saved.stderr
    path = cli.home / ".config" / "memoryhub" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": server, "api_key": key, "user_id": "bob"}
    assert cli.json("remember", "Bob likes tea.")["user_id"] == "bob"
    cli.env["MEMORYHUB_USER"] = "carol"
    assert cli.json("remember", "Carol likes coffee.")["user_id"] == "carol"


def test_login_with_a_wrong_key_saves_nothing(cli, server):
    refused = cli("login", "--url", server, "--api-key", "mh_wrong", "--user", "bob")
    assert refused.returncode == 2
    assert not (cli.home / ".config" / "memoryhub" / "config.json").exists()


@pytest.mark.parametrize(
    "transcript",
    [
        "user: I moved to Lisbon last month.\nassistant: Noted!\n",
        json.dumps(
            [{"role": "user", "content": "I moved to Lisbon last month."}, {"role": "assistant", "content": "Noted!"}]
        ),
        '{"role": "user", "content": "I moved to Lisbon last month."}\n{"role": "assistant", "content": "Noted!"}\n',
    ],
)
def test_capture_sends_a_transcript_in_each_shape(cli, transcript):
    accepted = cli.json("capture", "--session", "shell-1", stdin=transcript)
    job = CaptureJob.objects.get(pk=UUID(accepted["job_id"]))
    assert (job.user_id, job.session_id, job.trigger) == ("alice", "shell-1", "turn")
    assert [(m["role"], m["content"]) for m in job.window] == [
        ("user", "I moved to Lisbon last month."),
        ("assistant", "Noted!"),
    ]


def test_capture_of_text_without_roles_is_a_usage_error(cli):
    refused = cli("capture", stdin="just some words\n")
    assert refused.returncode == 1 and "role" in refused.stderr
    assert not CaptureJob.objects.exists()


def test_export_then_import_into_another_project(cli, other_project, tmp_path):
    cli("remember", "Alice deploys on Fridays.")
    path = tmp_path / "alice.jsonl"
    assert cli("export", "-o", str(path)).returncode == 0
    _, other_key = tenancy.api_key_create(project=other_project, name="cli")
    cli.env["MEMORYHUB_API_KEY"] = other_key
    result = cli.json("import", str(path))
    assert result["imported"]["memories"] == 1
    assert list(Memory.objects.filter(project=other_project).values_list("content", flat=True)) == [
        "Alice deploys on Fridays."
    ]


def test_bash_completion_completes_commands_and_options(cli):
    script = cli("completion", "bash").stdout

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (
            f'{script}\nCOMP_WORDS=(memoryhub {line}); COMP_CWORD={len(words)}; _memoryhub; echo "${{COMPREPLY[@]}}"'
        )
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()

    assert complete("rem") == ["remember"]
    assert complete("recall", "--bu") == ["--budget"]
    assert "claude-code" in complete("install", "")
    assert cli("completion", "zsh").stdout.startswith("#compdef memoryhub")


def test_capture_reads_a_claude_code_transcript_file(cli, tmp_path):
    transcript = Path(__file__).parent / "hook_payloads" / "claude_code_transcript.jsonl"
    accepted = cli.json("capture", "--file", str(transcript), "--trigger", "compaction")
    job = CaptureJob.objects.get(pk=UUID(accepted["job_id"]))
    assert job.trigger == "compaction"
    assert [m["role"] for m in job.window] == ["user", "assistant", "assistant"]


def test_profile_shows_the_standing_facts_after_a_rebuild(cli):
    missing = cli("--json", "profile")
    assert missing.returncode == 2 and json.loads(missing.stderr)["error"]["code"] == "profile_not_found"
    remembered = cli("remember", "Alice is allergic to peanuts.", "--category", "user-facts")
    assert remembered.returncode == 0, remembered.stderr
    rebuilt = cli.json("profile", "--rebuild")
    assert "peanuts" in rebuilt["text"] and rebuilt["version"] >= 1
    assert rebuilt["facts"][0]["memory_ids"] == [remembered.stdout.strip()]
    assert "peanuts" in cli("profile").stdout
    assert remembered.stdout.strip() in cli("profile", "--facts").stdout

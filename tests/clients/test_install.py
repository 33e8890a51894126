"""``memoryhub install|uninstall``: the hooks written into a coding agent's settings.json,
idempotently, next to whatever else is there, and taken out again exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

THEIRS = {
    "model": "opus",
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}],
    },
}


def commands(settings: dict, event: str) -> list[str]:
    return [hook["command"] for group in settings["hooks"].get(event, []) for hook in group["hooks"]]


def test_install_in_a_project_is_idempotent_and_uninstall_restores_the_file(cli, tmp_path: Path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS, indent=2))
    assert cli("install", "claude-code", "--project", cwd=tmp_path).returncode == 0
    once = path.read_text()
    cli("install", "claude-code", cwd=tmp_path)
    assert path.read_text() == once
    settings = json.loads(once)
    assert settings["model"] == "opus" and commands(settings, "PreToolUse") == ["./check.sh"]
    assert commands(settings, "Stop")[0] == "notify-send done"
    assert commands(settings, "Stop")[1].endswith("memoryhub hook Stop")
    for event in ("SessionStart", "UserPromptSubmit", "PreCompact"):
        assert [c.split()[-2:] for c in commands(settings, event)] == [["hook", event]]
    assert cli("uninstall", "claude-code", cwd=tmp_path).returncode == 0
    assert json.loads(path.read_text()) == THEIRS


def test_install_for_the_user_writes_to_the_home_settings(cli, tmp_path: Path):
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    cli("install", "claude-code", "--user", cwd=elsewhere)
    settings = json.loads((cli.home / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}
    assert not (elsewhere / ".claude").exists()
    cli("uninstall", "claude-code", "--user", cwd=elsewhere)
    assert json.loads((cli.home / ".claude" / "settings.json").read_text()) == {}


def test_gemini_hooks_carry_names_and_millisecond_timeouts(cli, tmp_path: Path):
    cli("install", "gemini", cwd=tmp_path)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    [group] = settings["hooks"]["BeforeAgent"]
    assert group["hooks"][0]["name"] == "memoryhub-BeforeAgent"
    assert group["hooks"][0]["timeout"] == 5000
    assert group["hooks"][0]["command"].endswith("hook --agent gemini BeforeAgent")
    assert set(settings["hooks"]) == {"SessionStart", "BeforeAgent", "AfterAgent"}


def test_a_settings_file_that_is_not_json_is_left_alone(cli, tmp_path: Path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ broken")
    refused = cli("install", "claude-code", cwd=tmp_path)
    assert refused.returncode == 1 and "not valid JSON" in refused.stderr
    assert path.read_text() == "{ broken"

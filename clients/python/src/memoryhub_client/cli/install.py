"""``memoryhub install|uninstall claude-code|gemini``: the hooks in the agent's settings.json.

Installing replaces MemoryHub's own entries and leaves every other setting and hook as it was,
so running it twice changes nothing; uninstalling removes exactly those entries (and the event
lists they leave empty). MemoryHub's entries are recognised by their command, ``... hook ...``
of this program, never by position.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from memoryhub_client.cli.config import UsageError
from memoryhub_client.cli.hooks import CAPTURE_EVENTS, events

SETTINGS = {"claude-code": ".claude", "gemini": ".gemini"}
_OURS = re.compile(r"(^|[/\\\s'\"])memoryhub(\.exe)?['\"]?\s+hook\s")


def settings_path(agent: str, *, user: bool, cwd: Path | None = None, home: Path | None = None) -> Path:
    """``~/.claude/settings.json`` (``--user``) or ``.claude/settings.json`` in the project."""
    base = (home or Path.home()) if user else (cwd or Path.cwd())
    return base / SETTINGS[agent] / "settings.json"


def program() -> str:
    """How the agent should run this program: its installed path when there is one."""
    found = shutil.which("memoryhub")
    return shlex.quote(found) if found else "memoryhub"


def entry(agent: str, event: str, command: str) -> dict[str, Any]:
    """One hook group for ``event``. Timeouts: Claude Code counts seconds, Gemini CLI
    milliseconds; both are well above the hook's own limit of 2 s, so the agent never has to
    kill it."""
    hook: dict[str, Any] = {"type": "command", "command": f"{command} hook {event}"}
    if agent == "gemini":
        hook["command"] = f"{command} hook --agent gemini {event}"
        hook["name"] = f"memoryhub-{event}"
        hook["timeout"] = 5000
    else:
        hook["timeout"] = 10 if event in CAPTURE_EVENTS[agent] else 5
    return {"hooks": [hook]}


def install(agent: str, path: Path, command: str) -> dict[str, Any]:
    """Write MemoryHub's hooks for ``agent`` into ``path``; the settings as written."""
    settings = _without_ours(_read(path))
    hooks = settings.setdefault("hooks", {})
    for event in events(agent):
        hooks.setdefault(event, []).append(entry(agent, event, command))
    _write(path, settings)
    return settings


def uninstall(path: Path) -> dict[str, Any]:
    """Remove MemoryHub's hooks from ``path``; the settings as written."""
    if not path.exists():
        return {}
    settings = _without_ours(_read(path))
    _write(path, settings)
    return settings


def _without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                group["hooks"] = [h for h in group["hooks"] if not _is_ours(h)]
                if not group["hooks"]:
                    continue
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    return settings


def _is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and bool(_OURS.search(str(hook.get("command", ""))))


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        settings = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as error:
        raise UsageError(f"{path} is not valid JSON ({error}); fix it first, nothing was changed") from error
    if not isinstance(settings, dict):
        raise UsageError(f"{path} is not a JSON object; nothing was changed")
    return settings


def _write(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)


def describe(agent: str, path: Path, *, installed: bool) -> str:
    verb = "installed in" if installed else "removed from"
    return f"memoryhub hooks for {agent} ({', '.join(events(agent))}) {verb} {path}"

"""``memoryhub hook <event>``: a coding agent's lifecycle hook, in that agent's protocol.

The agent runs the command with the event's JSON payload on standard input. Events that start a
session or a turn answer with relevant memories as ``additionalContext`` (``POST /retrieve``'s
``injection``, within a token budget); events that end a turn or compact the context send what
is new in the conversation to ``POST /capture``. A hook never stands in the agent's way: any
failure (server down, bad payload, a bug) is written to the log file and the hook exits 0 with
no context, at most ``MEMORYHUB_HOOK_TIMEOUT`` seconds (default 1, at most 2) after the agent
started it. A context hook is on the user's wait for every prompt: it imports only what one
request needs (``hook_http``), nothing of the client library, ``typing`` or ``logging``.

Claude Code's transcript is JSON lines that only grow; a state file per session remembers the
last line sent, and the range in flight, so a turn is never sent twice: a range whose answer was
lost is resent with the same ``Idempotency-Key`` (the server answers the first answer).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

from memoryhub_client.cli import config as settings
from memoryhub_client.cli import hook_http
from memoryhub_client.cli.transcripts import MAX_MESSAGE_CHARS, claude_code_message

# Only for annotations: importing typing (or the client) costs every prompt's hook.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from memoryhub_client.client import MemoryHub

AGENTS = ("claude-code", "gemini")
CONTEXT_EVENTS = {"claude-code": ("SessionStart", "UserPromptSubmit"), "gemini": ("SessionStart", "BeforeAgent")}
CAPTURE_EVENTS = {"claude-code": {"Stop": "turn", "PreCompact": "compaction"}, "gemini": {"AfterAgent": "turn"}}
MAX_TIMEOUT_S = 2.0
# What one capture request may carry (the API's MEMORYHUB_MAX_CAPTURE_MESSAGES).
MAX_MESSAGES = 200


def events(agent: str) -> tuple[str, ...]:
    return CONTEXT_EVENTS[agent] + tuple(CAPTURE_EVENTS[agent])


def parse(args: Sequence[str]) -> tuple[str, str] | None:
    """``(agent, event)`` from ``[--agent AGENT] [--json] EVENT``, or None for anything else (the
    whole command line then parses it, and explains what is wrong)."""
    rest = [a for a in args if a != "--json"]
    agent = "claude-code"
    if rest[:1] == ["--agent"] and len(rest) >= 2:
        agent, rest = rest[1], rest[2:]
    elif rest[:1] and rest[0].startswith("--agent="):
        agent, rest = rest[0].partition("=")[2], rest[1:]
    if len(rest) != 1 or agent not in AGENTS or rest[0] not in events(agent):
        return None
    return agent, rest[0]


def state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$MEMORYHUB_STATE_DIR``, else ``$XDG_STATE_HOME/memoryhub`` (``~/.local/state``)."""
    if env.get("MEMORYHUB_STATE_DIR"):
        return Path(env["MEMORYHUB_STATE_DIR"])
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "memoryhub"


class HookTimeout(Exception):
    """The hook's whole time is spent (request timeouts alone do not bound a connect plus a read)."""


def _expire(signum: int, frame: object) -> None:
    raise HookTimeout("timed out: the hook's time limit was reached")


def run(agent: str, event: str, raw: str, env: Mapping[str, str] = os.environ) -> str:
    """What the hook prints for ``event`` given its payload; never raises."""
    try:
        return _run_within_limit(agent, event, raw, env)
    except HookTimeout:  # the alarm rang between the work's end and its disarming
        return _context_answer(agent, event, "")


def _run_within_limit(agent: str, event: str, raw: str, env: Mapping[str, str]) -> str:
    # The agent's clock started when it started this process, not when Python got here. A start
    # longer ago than the whole timeout is a clock not to be compared with this one (a container's
    # own boot time), not a start-up that slow: then the timeout counts from here.
    timeout, spent = _timeout(env), running_for()
    deadline = time.monotonic() + (max(timeout - spent, 0.01) if spent < timeout else timeout)
    if hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, _expire)
        signal.setitimer(signal.ITIMER_REAL, deadline - time.monotonic())
    try:
        payload = json.loads(raw or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the payload is not a JSON object")
        conf = settings.load(env).require()
        if event in CONTEXT_EVENTS[agent]:
            return _context_answer(agent, event, _context(conf, event, payload, env, deadline))
        if event in CAPTURE_EVENTS[agent]:
            # The full client here: a capture hook's answer is not awaited by the user.
            from memoryhub_client._core import NO_RETRY  # noqa: PLC0415
            from memoryhub_client.client import MemoryHub  # noqa: PLC0415

            timeout = max(deadline - time.monotonic(), 0.01)
            with MemoryHub(base_url=conf.url, api_key=conf.api_key, timeout=timeout, retry=NO_RETRY) as hub:
                sent = _capture(hub, conf, agent, CAPTURE_EVENTS[agent][event], payload, env, deadline)
            _note(env, "INFO", f"{agent} {event}: sent {sent} message(s)")
        else:
            _note(env, "WARNING", f"{agent}: no hook for event {event!r}")
    except Exception as error:
        _note(env, "ERROR", f"{agent} {event} failed; the agent goes on without memory", error)
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
    return _context_answer(agent, event, "")


def _timeout(env: Mapping[str, str]) -> float:
    try:
        wanted = float(env.get("MEMORYHUB_HOOK_TIMEOUT", "1"))
    except ValueError:
        wanted = 1.5
    return min(max(wanted, 0.1), MAX_TIMEOUT_S)


def running_for() -> float:
    """Seconds since this process started (Linux's ``/proc``; 0 where there is none): starting
    Python and importing come out of the hook's time, in steps of the kernel's clock tick."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            # The fields after the command name, whose parentheses may hold spaces; the 22nd
            # field, the start time in ticks after boot, is the 20th of these.
            started = int(stat.read().rpartition(b")")[2].split()[19]) / os.sysconf("SC_CLK_TCK")
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def _context(
    conf: settings.Config, event: str, payload: dict[str, Any], env: Mapping[str, str], deadline: float
) -> str:
    body = retrieve_body(conf.user_id, event, payload, env)
    return str(_post(conf, "/retrieve", body, timeout=max(deadline - time.monotonic(), 0.01)).get("injection") or "")


def retrieve_body(user_id: str, event: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The ``POST /retrieve`` body for this event: the prompt's memories, or at session start the
    memories about the project the agent was opened in."""
    prompt = payload.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        query = prompt
    else:
        project = Path(str(payload.get("cwd") or ".")).name
        query = f"Working on the {project} project: conventions, decisions and preferences to follow."
    session = str(payload.get("session_id") or "")
    turn = hashlib.sha256(f"{session}\n{event}\n{query}".encode()).hexdigest()[:32]
    budget = int(env.get("MEMORYHUB_HOOK_TOKEN_BUDGET", "800"))
    body = {"user_id": user_id, "query": query[:MAX_MESSAGE_CHARS], "turn_id": turn, "token_budget": budget}
    # No LLM call: HyDE's own limit (1.2 s) is beyond the hook's, and either would take most of
    # the prompt's budget of 150 ms; the project's settings would otherwise turn both on.
    return body | {"hyde": False, "judge": False}


def _post(conf: settings.Config, path: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """One request (``hook_http``: not the client's transport, nor ``http.client``, which cost a
    prompt more to import than the request takes), once, no retries. Error answers raise as the
    client's would."""
    headers = {"Authorization": f"Bearer {conf.api_key}", "Accept": "application/json"}
    headers["Content-Type"] = "application/json"
    url = conf.url.rstrip("/") + "/api/v1" + path
    status, raw = hook_http.post(url, json.dumps(body).encode(), headers, timeout=timeout)
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        answer = None
    if status >= 400:
        from memoryhub_client.errors import error_for  # noqa: PLC0415 (only an error answer needs it)

        raise error_for(status, answer)
    return answer if isinstance(answer, dict) else {}


def _context_answer(agent: str, event: str, context: str) -> str:
    """The hook's standard output: Claude Code takes no output as "nothing to add"; Gemini CLI
    wants a JSON object on stdout whatever happens."""
    if event not in CONTEXT_EVENTS.get(agent, ()) or not context:
        return "{}" if agent == "gemini" else ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})


def _capture(
    hub: MemoryHub,
    conf: settings.Config,
    agent: str,
    trigger: str,
    payload: dict[str, Any],
    env: Mapping[str, str],
    deadline: float,
) -> int:
    session = str(payload.get("session_id") or "")
    if agent == "gemini":
        return _capture_gemini_turn(hub, conf, session, payload)
    path = Path(str(payload["transcript_path"]))
    return TranscriptSender(hub, conf, session, trigger, path, env, deadline=deadline).send()


def _capture_gemini_turn(hub: MemoryHub, conf: settings.Config, session: str, payload: dict[str, Any]) -> int:
    """Gemini CLI hands the turn itself (prompt and final answer); the key is the turn's hash,
    so the same turn delivered twice is captured once."""
    messages = [
        {"role": role, "content": text[:MAX_MESSAGE_CHARS]}
        for role, text in (("user", payload.get("prompt")), ("assistant", payload.get("prompt_response")))
        if isinstance(text, str) and text.strip()
    ]
    if not messages:
        return 0
    key = _key("gemini", session, json.dumps(messages, sort_keys=True))
    hub.capture(
        user_id=conf.user_id, messages=messages, trigger="turn", session_id=session[:255] or None, idempotency_key=key
    )
    return len(messages)


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class TranscriptSender:
    """Sends the lines of a Claude Code transcript that were not sent yet, in ranges of at most
    ``MAX_MESSAGES`` messages; the state file records the next line and the range in flight."""

    def __init__(
        self,
        hub: MemoryHub,
        conf: settings.Config,
        session: str,
        trigger: str,
        path: Path,
        env: Mapping[str, str],
        *,
        deadline: float,
    ) -> None:
        self.hub, self.conf, self.session, self.trigger, self.path = hub, conf, session, trigger, path
        self.state_file = state_dir(env) / "claude-code" / f"{_key(session)[:32]}.json"
        # Ranges left when the time is up (time.monotonic()) go with the next event: the agent is waiting.
        self.deadline = deadline

    def send(self) -> int:
        lines = self._complete_lines()
        state = self._load()
        if state["line"] > len(lines):  # another file under the same session: start over
            state = {"line": 0, "pending": None}
        sent = 0
        if state["pending"]:
            start, end = state["pending"]
            sent += self._send_range(lines, start, end, state)
        while state["line"] < len(lines) and time.monotonic() < self.deadline:
            start, end = state["line"], self._range_end(lines, state["line"])
            state["pending"] = [start, end]
            self._save(state)
            sent += self._send_range(lines, start, end, state)
        return sent

    def _send_range(self, lines: list[str], start: int, end: int, state: dict[str, Any]) -> int:
        messages = [m for m in (self._message(line) for line in lines[start:end]) if m is not None]
        if messages:
            self.hub.capture(
                user_id=self.conf.user_id,
                messages=messages,
                trigger=self.trigger,
                session_id=self.session[:255] or None,
                idempotency_key=_key("claude-code", self.session, str(start), str(end)),
            )
        state.update(line=end, pending=None)
        self._save(state)
        return len(messages)

    def _range_end(self, lines: list[str], start: int) -> int:
        count, end = 0, start
        while end < len(lines) and (count < MAX_MESSAGES or self._message(lines[end]) is None):
            count += self._message(lines[end]) is not None
            end += 1
        return end

    @staticmethod
    def _message(line: str) -> dict[str, Any] | None:
        try:
            return claude_code_message(json.loads(line))
        except ValueError:
            return None

    def _complete_lines(self) -> list[str]:
        """The transcript's lines, without a last line still being written (no newline yet)."""
        data = self.path.read_bytes()
        lines = data.decode("utf-8", errors="replace").split("\n")
        return lines[:-1]

    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
            return {"line": int(state["line"]), "pending": state.get("pending")}
        except (OSError, ValueError, KeyError, TypeError):
            return {"line": 0, "pending": None}

    def _save(self, state: dict[str, Any]) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = self.state_file.with_suffix(".tmp")
        partial.write_text(json.dumps(state), encoding="utf-8")
        partial.replace(self.state_file)


def _note(env: Mapping[str, str], level: str, message: str, error: BaseException | None = None) -> None:
    """One line in ``hooks.log`` in the state folder (the agent reads the hook's stdout, and may
    show stderr), with a traceback when ``error`` is a bug rather than a server that is down, slow
    or refusing. Without the logging module: a hook that failed has spent its time already, and
    a server that does not answer must cost the agent no more than the hook's timeout."""
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {level} {message}"
    if error is not None:
        line += f": {type(error).__name__}: {error}"
        expected = isinstance(error, (OSError, ValueError, HookTimeout, settings.UsageError))
        if not expected and type(error).__module__ != "memoryhub_client.errors":
            import traceback  # noqa: PLC0415 (a bug's traceback; no other failure needs it)

            line += "\n" + "".join(traceback.format_exception(error)).rstrip()
    path = state_dir(env) / "hooks.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError:
        pass  # nowhere to write: the agent still gets its answer

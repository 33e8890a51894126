"""``memoryhub``: the command line. Exit status: 0 done, 1 usage (bad arguments, missing
configuration, unreadable input), 2 the server answered with an error, 3 the server was not
reachable. Errors go to standard error (as the API's envelope with ``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from memoryhub_client.cli import commands, completion, hooks, install
from memoryhub_client.cli import config as settings
from memoryhub_client.errors import MemoryHubError, TransportError

OK, USAGE, API_ERROR, UNREACHABLE = 0, 1, 2, 3
Command = Callable[[argparse.Namespace, settings.Config], int]


class Parser(argparse.ArgumentParser):
    """argparse with exit status 1 for usage errors (argparse's own is 2, ours for the API)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def parser() -> Parser:
    top = Parser(prog="memoryhub", description="Long-term memory for AI agents, from the shell.")
    top.add_argument("--json", action="store_true", help="print JSON (errors too, on stderr)")
    top.add_argument("--timeout", type=float, default=30.0, help="seconds per request (30)")
    # --json after the command too (`memoryhub list --json`), without undoing one given before it.
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    login = sub.add_parser("login", parents=[common], help="check and save the server, API key and user")
    login.add_argument("--url")
    login.add_argument("--api-key")
    login.add_argument("--user")
    login.add_argument("--no-check", action="store_true", help="save without calling the server")
    remember = sub.add_parser("remember", parents=[common], help="store a memory (text as arguments or on stdin)")
    remember.add_argument("text", nargs="*")
    remember.add_argument("--kind", choices=("fact", "preference", "decision", "note"))
    remember.add_argument("--category")
    remember.add_argument("--scope", choices=("user", "project"))
    remember.add_argument("--importance", type=float)
    recall = sub.add_parser("recall", parents=[common], help="the memories relevant to a question")
    recall.add_argument("question", nargs="*")
    recall.add_argument("--limit", type=int)
    recall.add_argument("--budget", type=int, help="token budget of the injection")
    recall.add_argument("--ids", action="store_true", help="one memory per line with its score, not the injection")
    forget = sub.add_parser("forget", parents=[common], help="delete memories by id")
    forget.add_argument("ids", nargs="+")
    listing = sub.add_parser("list", parents=[common], help="the user's memories, newest first")
    for option in ("--kind", "--category", "--scope", "--status", "--q"):
        listing.add_argument(option)
    listing.add_argument("--limit", type=int, default=50)
    profile = sub.add_parser("profile", parents=[common], help="the user's profile: standing facts from their memories")
    profile.add_argument("--rebuild", action="store_true", help="rebuild it from the active memories first")
    profile.add_argument("--facts", action="store_true", help="one fact per line with the memories it rests on")
    capture = sub.add_parser("capture", parents=[common], help="send a transcript (stdin: JSON or `role: text` lines)")
    capture.add_argument("--file")
    capture.add_argument("--session")
    capture.add_argument("--trigger", choices=("turn", "compaction"), default="turn")
    capture.add_argument("--wait", type=float, default=0, help="seconds to wait for the job to finish")
    export = sub.add_parser("export", parents=[common], help="the user's memories as JSON lines")
    export.add_argument("-o", "--output")
    export.add_argument("--project", action="store_true", help="every user of the project, not just this one")
    export.add_argument("--conversations", action="store_true")
    importing = sub.add_parser("import", parents=[common], help="import an export file (or - for stdin)")
    importing.add_argument("file")
    shell = sub.add_parser("completion", parents=[common], help="a shell completion script")
    shell.add_argument("shell", choices=("bash", "zsh"))
    hook = sub.add_parser("hook", parents=[common], help="run as a coding agent's hook (payload on stdin)")
    hook.add_argument("--agent", choices=hooks.AGENTS, default="claude-code")
    hook.add_argument("event")
    for verb in ("install", "uninstall"):
        setup = sub.add_parser(verb, parents=[common], help=f"{verb} the hooks in a coding agent's settings")
        setup.add_argument("agent", choices=hooks.AGENTS)
        where = setup.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_true", help="the user's settings (~/.claude, ~/.gemini)")
        where.add_argument("--project", action="store_true", help="this project's settings (the default)")
    return top


COMMANDS: dict[str, Command] = {
    "remember": commands.remember,
    "recall": commands.recall,
    "forget": commands.forget,
    "list": commands.list_,
    "capture": commands.capture,
    "profile": commands.profile,
    "export": commands.export,
    "import": commands.import_,
}


def main(argv: Sequence[str] | None = None) -> int:
    top = parser()
    args = top.parse_args(argv)
    try:
        return _dispatch(top, args)
    except settings.UsageError as error:
        return _fail(args, USAGE, "usage", str(error))
    except TransportError as error:
        return _fail(args, UNREACHABLE, "unreachable", f"cannot reach the server: {error.message}")
    except MemoryHubError as error:
        return _fail(args, API_ERROR, error.code, error.message, error.details, status=error.status)
    except OSError as error:
        return _fail(args, USAGE, "io_error", str(error))


def _dispatch(top: Parser, args: argparse.Namespace) -> int:
    if args.command is None:
        top.print_help(sys.stderr)
        return USAGE
    if args.command == "hook":
        if args.event not in hooks.events(args.agent):
            return _fail(
                args, USAGE, "usage", f"{args.agent} has no {args.event!r} hook: {', '.join(hooks.events(args.agent))}"
            )
        sys.stdout.write(hooks.run(args.agent, args.event, sys.stdin.read()))
        return OK
    if args.command == "completion":
        sys.stdout.write(completion.bash(top) if args.shell == "bash" else completion.zsh(top))
        return OK
    if args.command in ("install", "uninstall"):
        return _setup(args)
    conf = settings.load()
    if args.command == "login":
        return commands.login(args, conf)
    return COMMANDS[args.command](args, conf.require())


def _setup(args: argparse.Namespace) -> int:
    path = install.settings_path(args.agent, user=args.user)
    if args.command == "install":
        install.install(args.agent, path, install.program())
    else:
        install.uninstall(path)
    message = install.describe(args.agent, path, installed=args.command == "install")
    print(json.dumps({"settings": str(path), "agent": args.agent}) if args.json else message)
    return OK


def _fail(
    args: argparse.Namespace, exit_status: int, code: str, message: str, details: object = None, *, status: int = 0
) -> int:
    """Print the error (the API's envelope with ``--json``, plus the HTTP status) and return the
    exit status."""
    if getattr(args, "json", False):
        error = {"code": code, "message": message, "details": details, "status": status}
        print(json.dumps({"error": error}), file=sys.stderr)
    else:
        print(f"memoryhub: {message}" + (f" ({code})" if exit_status == API_ERROR else ""), file=sys.stderr)
    return exit_status


def run() -> NoReturn:
    """The console script's entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()

"""The commands for people and scripts: each takes the parsed arguments and the configuration,
prints its answer, and returns the exit status (errors are raised and mapped by ``app``)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from memoryhub_client.cli import config as settings
from memoryhub_client.cli import transcripts
from memoryhub_client.cli.output import emit_json, memory_line
from memoryhub_client.client import MemoryHub


def client(conf: settings.Config, args: argparse.Namespace) -> MemoryHub:
    return MemoryHub(base_url=conf.url, api_key=conf.api_key, timeout=args.timeout)


def text_argument(words: list[str]) -> str:
    """The words given, or standard input when there are none or the only one is ``-``."""
    if not words or words == ["-"]:
        return sys.stdin.read().strip()
    return " ".join(words).strip()


def login(args: argparse.Namespace, conf: settings.Config) -> int:
    """Check the server and key, then write them (and the user) to the config file."""
    url = args.url or conf.url or input("MemoryHub URL: ").strip()
    api_key = args.api_key or conf.api_key or getpass.getpass("API key: ").strip()
    user_id = args.user or conf.user_id or input("User id (the person the agent works for): ").strip()
    new = settings.Config(url=url, api_key=api_key, user_id=user_id).require()
    if not args.no_check:
        with client(new, args) as hub:
            hub.list_memories(user_id=user_id, limit=1)
    path = settings.save(new)
    if args.json:
        emit_json({"config": str(path), "url": url, "user_id": user_id})
    else:
        print(f"saved to {path}")
    return 0


def remember(args: argparse.Namespace, conf: settings.Config) -> int:
    content = text_argument(args.text)
    if not content:
        raise settings.UsageError("nothing to remember: give the text as arguments or on standard input")
    with client(conf, args) as hub:
        memory = hub.create_memory(
            user_id=conf.user_id,
            content=content,
            kind=args.kind,
            category=args.category,
            scope=args.scope,
            importance=args.importance,
        )
    emit_json(memory) if args.json else print(memory.id)
    return 0


def recall(args: argparse.Namespace, conf: settings.Config) -> int:
    question = text_argument(args.question)
    if not question:
        raise settings.UsageError("no question: give it as arguments or on standard input")
    with client(conf, args) as hub:
        found = hub.retrieve(user_id=conf.user_id, query=question, limit=args.limit, token_budget=args.budget)
    if args.json:
        emit_json(found)
    elif args.ids:
        for memory in found.memories:
            print(f"{memory.score:.2f}  {memory_line(memory)}")
    elif found.injection:
        print(found.injection)
    return 0


def forget(args: argparse.Namespace, conf: settings.Config) -> int:
    with client(conf, args) as hub:
        for memory_id in args.ids:
            hub.delete_memory(memory_id=memory_id, user_id=conf.user_id)
    if args.json:
        emit_json({"deleted": args.ids})
    return 0


def list_(args: argparse.Namespace, conf: settings.Config) -> int:
    filters = {"kind": args.kind, "category": args.category, "scope": args.scope, "status": args.status, "q": args.q}
    with client(conf, args) as hub:
        memories = []
        for memory in hub.iter_memories(user_id=conf.user_id, limit=min(args.limit, 200), **filters):
            memories.append(memory)
            if len(memories) >= args.limit:
                break
    if args.json:
        emit_json(memories)
    else:
        for memory in memories:
            print(memory_line(memory))
    return 0


def profile(args: argparse.Namespace, conf: settings.Config) -> int:
    """The user's profile (its standing facts), rebuilt first with ``--rebuild``."""
    with client(conf, args) as hub:
        found = hub.rebuild_profile(user_id=conf.user_id) if args.rebuild else hub.get_profile(user_id=conf.user_id)
    if args.json:
        emit_json(found)
    elif args.facts:
        for fact in found.facts:
            print(f"{fact.text}  [{'pinned' if fact.pinned else ', '.join(fact.memory_ids)}]")
    else:
        print(found.text)
    return 0


def capture(args: argparse.Namespace, conf: settings.Config) -> int:
    """Send a transcript read from standard input (or a file) to ``POST /capture``."""
    text = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
    try:
        messages = transcripts.parse(text)
    except transcripts.TranscriptError as error:
        raise settings.UsageError(f"transcript: {error}") from error
    if not messages:
        raise settings.UsageError("transcript: no messages on standard input")
    with client(conf, args) as hub:
        accepted = hub.capture(user_id=conf.user_id, messages=messages, trigger=args.trigger, session_id=args.session)
        job = (
            hub.wait_for_capture(job_id=accepted.job_id, user_id=conf.user_id, timeout=args.wait) if args.wait else None
        )
    if args.json:
        emit_json(job or accepted)
    else:
        print(accepted.job_id if job is None else f"{job.job_id} {job.status} {len(job.memory_ids)} memories")
    return 0


def export(args: argparse.Namespace, conf: settings.Config) -> int:
    user = None if args.project else conf.user_id
    with client(conf, args) as hub:
        text = hub.export(user_id=user, conversations=args.conversations or None)
    if args.output and args.output != "-":
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def import_(args: argparse.Namespace, conf: settings.Config) -> int:
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    with client(conf, args) as hub:
        result = hub.import_jsonl(text=text)
    if args.json:
        emit_json(result)
    else:
        counts = ", ".join(f"{value} {name}" for name, value in vars(result.imported).items())
        print(f"imported {counts}; skipped {result.skipped}")
    return 0

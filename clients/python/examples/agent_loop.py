"""An agent loop wired to MemoryHub: retrieve before the model call, capture after.

The "model" echoes (no LLM needed), so this runs as is against a server:

    MEMORYHUB_URL=http://localhost:8000 MEMORYHUB_API_KEY=mh_... python clients/python/examples/agent_loop.py

Swap ``call_model`` for your LLM call; the memory side stays the same.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from memoryhub_client import MemoryHub, RateLimited

USER = os.environ.get("MEMORYHUB_USER", "demo-user")


def call_model(messages: list[dict[str, Any]]) -> str:
    """Stand-in for an LLM: answers with what it was given, so the memory wiring is visible."""
    system, question = messages[0]["content"], messages[-1]["content"]
    remembered = system.split("\n", 1)[1] if "\n" in system else "(nothing yet)"
    return f"You asked: {question!r}. What I remember:\n{remembered}"


def turn(hub: MemoryHub, *, session_id: str, history: list[dict[str, Any]], user_text: str) -> str:
    """One agent turn: recall what is relevant, answer, hand the turn over for capture."""
    history.append({"role": "user", "content": user_text})
    try:
        # The conversation window, not only the last line: "what about him?" needs context.
        recalled = hub.retrieve(user_id=USER, messages=history[-6:], token_budget=400)
        memory_block = recalled.injection
    except RateLimited:
        memory_block = ""  # the client already waited what the server asked; answer without memory
    system = "You are a helpful assistant. Relevant memories:\n" + memory_block
    answer = call_model([{"role": "system", "content": system}, *history])
    history.append({"role": "assistant", "content": answer})
    # Capture runs in the background on the server: this returns at once with a job id.
    hub.capture(user_id=USER, session_id=session_id, trigger="turn", messages=history[-2:])
    return answer


def main() -> None:
    """Seed one memory, then run two turns of a conversation."""
    url = os.environ.get("MEMORYHUB_URL", "http://localhost:8000")
    with MemoryHub(base_url=url, api_key=os.environ["MEMORYHUB_API_KEY"]) as hub:
        hub.create_memory(user_id=USER, content="The user is allergic to peanuts.", kind="fact")
        session_id, history = f"demo-{uuid.uuid4().hex[:8]}", list[dict[str, Any]]()
        for text in ("Which snacks should I avoid because of my allergy?", "And something for dinner?"):
            print(f"user: {text}")
            print(f"agent: {turn(hub, session_id=session_id, history=history, user_text=text)}\n")


if __name__ == "__main__":
    main()

"""OpenAI function-tool schemas and the query_memory tool's answer shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memories.models import Kind

if TYPE_CHECKING:
    from retrieval.shapes import RetrieveResult

KINDS = list(Kind.values)

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "query_memory",
            "description": (
                "Retrieve relevant memories from the user's past conversations and stored context. Use this when "
                "the user's question may relate to something discussed previously or when personalization would "
                "improve the response."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Search query to find relevant memories. Should capture the semantic intent "
                        "of what context would be helpful.",
                    },
                    "types": {
                        "type": "array",
                        "items": {"type": "string", "enum": KINDS},
                        "description": "Filter to specific memory types",
                    },
                    "categories": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Filter to categories, e.g. finding, insight, lesson for agent observations",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add_memory",
            "description": (
                "Store a durable fact, preference or decision about the user or project that will matter in future "
                "conversations. Never store secrets or transient details."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "One self-contained sentence, third person."},
                    "type": {"type": "string", "enum": KINDS},
                    "category": {"type": "string", "description": "A category of the project's taxonomy"},
                },
                "required": ["content"],
                "additionalProperties": False,
            },
        },
    },
]


def tool_memories(result: RetrieveResult) -> dict[str, Any]:
    """A retrieve answer in the reference's tool shape, grouped by category too."""
    found: list[tuple[float, int, dict[str, Any], str]] = []
    for order, hit in enumerate(result.memories):
        memory = hit.memory
        context = f"{memory.category or 'uncategorised'} · {memory.scope} · v{memory.version}"
        context += f" · saved {memory.created_at:%Y-%m-%d}"
        entry = {"content": memory.content, "type": memory.kind, "relevance": hit.score, "context": context}
        found.append((hit.score, order, entry, memory.category or "uncategorised"))
    # What the user said that no memory holds, in their words, ranked with the memories.
    for order, episode in enumerate(result.episodes, start=len(found)):
        context = f"the user said on {episode.said_at:%Y-%m-%d}"
        entry = {
            "content": episode.content,
            "type": "episode",
            "relevance": round(episode.score, 4),
            "context": context,
        }
        found.append((episode.score, order, entry, "episodes"))
    memories = []
    by_category: dict[str, list[int]] = {}
    for index, (_, _, entry, category) in enumerate(sorted(found, key=lambda item: (-item[0], item[1]))):
        memories.append(entry)
        by_category.setdefault(category, []).append(index)
    return {
        "memories": memories,
        "metadata": {
            "count": len(memories),
            "truncated": result.truncated,
            "by_category": by_category,
            "degraded": result.degraded,
        },
    }

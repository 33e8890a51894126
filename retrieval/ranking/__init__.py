"""Finding and ordering memories for a turn: hybrid search (full text and vectors fused), keyword
statistics, the fitted relevance model, the LLM judge, graph hops, episodes, and packing into a token budget."""

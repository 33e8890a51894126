"""Turning text into vectors: the local MiniLM (its int8 build) and the optional mpnet, the
OpenAI-compatible embedder, the Redis vector cache, and re-embedding a project."""

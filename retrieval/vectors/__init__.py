"""Storing and reading vectors: memories' and messages' vectors, the HNSW index's management, each
web process's resident copy of a user's vectors, and near-duplicate lookups."""

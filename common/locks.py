"""Postgres advisory locks held by a session: one worker at a time per key, released by Postgres
itself if the worker dies (its connection closes)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection


@contextmanager
def advisory_lock(namespace: int, key: str) -> Iterator[bool]:
    """Try the session-level lock ``(namespace, hashtext(key))``; yields whether it was taken.

    Held across transactions (a capture's LLM call runs outside any), unlike a transaction lock.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", [namespace, key])
        row = cursor.fetchone()
    acquired = bool(row and row[0])
    try:
        yield acquired
    finally:
        if acquired:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [namespace, key])
            except DatabaseError:
                connection.close()  # the lock dies with the session

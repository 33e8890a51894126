"""Statements Postgres plans once per connection: the retrieve path's own SQL, sent as named
prepared statements with their parameters bound by the server.

Django binds parameters on the client: every statement reaches Postgres as one text with the
values inlined, and Postgres parses, rewrites and plans it afresh. For the hybrid search's two
statements, the load of the returned memories and the API-key lookup that was ~1.9 ms of the
~6 ms of Postgres CPU a retrieve cost (100k memories, ``pg_stat_statements``;
docs/adr/0039-prepared-statements.md). Prepared once per connection, Postgres plans each with its
parameters for the first five runs and then, when a plan for any parameters is estimated no worse, keeps that one
(``plan_cache_mode`` auto, Postgres's default for prepared statements).

``cursor()`` is a Django cursor (the execute wrappers, ``connection.queries`` when debugging, the
database-error wrapping) over a psycopg server-binding cursor that prepares what it runs.
``pipeline()`` sends the statements run inside it in one round trip, in one implicit transaction:
a ``set_config(..., true)`` in the first lasts for the next (the search's settings), as a
multi-statement text did on the client-bound path.

Django turns psycopg's preparing off (``prepare_threshold`` None); ``config.database_settings`` gives
it a threshold no statement reaches, so nothing is prepared unless asked for here. psycopg forgets its
prepared statements after a ROLLBACK (a savepoint's too) and prepares again. Off with
``MEMORYHUB_PREPARED_STATEMENTS=0`` (a pooler in transaction mode that does not keep prepared
statements per client): the same statements, bound by the server, unnamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper


class _PreparingCursor(psycopg.Cursor):
    """A server-binding cursor that prepares every statement unless switched off (Django's wrapper
    calls ``execute`` without psycopg's ``prepare`` keyword; a caller's is overruled)."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        prepare = bool(settings.MEMORYHUB_PREPARED_STATEMENTS)
        return super().execute(query, params, prepare=prepare, binary=binary)


class _DebugCursor(CursorDebugWrapper):
    """Django's debugging wrapper (``connection.queries``, query-counting tests), logging the
    statement as written: Django reads the text sent from a client-bound cursor only."""

    @contextmanager
    def debug_sql(
        self, sql: Any = None, params: Any = None, use_last_executed_query: bool = False, many: bool = False
    ) -> Iterator[None]:
        with super().debug_sql(sql, params, use_last_executed_query=False, many=many):
            yield


def cursor() -> CursorWrapper:
    """A cursor on the default connection whose statements Postgres prepares (see the module)."""
    connection.ensure_connection()
    raw = _PreparingCursor(connection.connection)
    return _DebugCursor(raw, connection) if connection.queries_logged else CursorWrapper(raw, connection)


@contextmanager
def pipeline() -> Iterator[None]:
    """The statements run inside the block go in one round trip and, outside a transaction, one
    implicit transaction (one Sync at the end); their rows are fetched inside it. Errors surface as
    Django's."""
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield

"""Postgres row-level security: the database's own tenant wall behind the selectors.

Every table that holds user content carries a policy for one role, ``memoryhub_tenant``:
a row is visible (and writable) only when its project is the one named by the session
setting ``memoryhub.project_id``. An API request, once its key is known, switches its
connection to that role with its project (:func:`enter`); the ``RowSecurityMiddleware``
switches back when the response is ready (:func:`leave`). So a query that forgets its
``project=`` filter returns nothing from other projects instead of their memories.

Everything else (Celery workers, the curation UI, management commands) connects as the
owning role, to which the policies do not apply: those paths act across projects by design
and are guarded by the selectors and role checks. Per-user isolation inside a project stays
in the selectors (one key serves every end user of its project). docs/adr/0014-row-level-security.md
has the measured cost and the reasons.

The role and policies come from migrations (``memories/0006``, ``capture/0002``,
``retrieval/0003``) with the SQL below; a database user that may not create roles gets a
warning at migrate time and the API runs without this second wall (:func:`available`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

ROLE = "memoryhub_tenant"
SETTING = "memoryhub.project_id"
_PROJECT = f"nullif(current_setting('{SETTING}', true), '')::bigint"


def role_sql() -> list[str]:
    """Create the role (no login, no bypass) and give it the tables' data, now and later."""
    return [
        f"""DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
                CREATE ROLE {ROLE} NOLOGIN NOBYPASSRLS;
            END IF;
        END $$""",
        f"GRANT {ROLE} TO CURRENT_USER",
        f"GRANT USAGE ON SCHEMA public TO {ROLE}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ROLE}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {ROLE}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {ROLE}",
    ]


def project_policy_sql(table: str) -> list[str]:
    """The policy for a table with a ``project_id`` column."""
    return _policy(table, f"project_id = {_PROJECT}")


def parent_policy_sql(table: str, column: str, parent: str) -> list[str]:
    """The policy for a child table: visible when its parent row is (the parent's policy applies)."""
    return _policy(table, f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {table}.{column})")


def _policy(table: str, condition: str) -> list[str]:
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"DROP POLICY IF EXISTS tenant_rows ON {table}",
        f"CREATE POLICY tenant_rows ON {table} TO {ROLE} USING ({condition}) WITH CHECK ({condition})",
    ]


def drop_policy_sql(table: str) -> list[str]:
    return [f"DROP POLICY IF EXISTS tenant_rows ON {table}", f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"]


def can_manage_roles(schema_editor: Any) -> bool:
    """Whether the migrating user may create the role (superuser or CREATEROLE)."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def apply(schema_editor: Any, statements: list[str]) -> None:
    """Run a migration's statements, or warn and skip when roles cannot be managed here."""
    if not can_manage_roles(schema_editor):
        log.warning(
            "row-level security skipped: database user may not create roles; the API runs without it "
            "(docs/adr/0014-row-level-security.md)"
        )
        return
    for statement in statements:
        schema_editor.execute(statement)


# --- per request ---------------------------------------------------------------------------------

_available: dict[str, bool] = {}


def available() -> bool:
    """Whether this database has the role and this connection's user may switch to it (cached per alias)."""
    if not getattr(settings, "MEMORYHUB_ROW_SECURITY", True):
        return False
    alias = connection.alias
    if alias not in _available:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) "
                    "AND pg_has_role(current_user, %s, 'MEMBER')",
                    [ROLE, ROLE],
                )
                row = cursor.fetchone()
            _available[alias] = bool(row and row[0])
        except DatabaseError:
            return False
    return _available[alias]


def enter(project_id: int) -> bool:
    """Confine this connection to ``project_id``'s rows until :func:`leave`; whether it did."""
    if not available():
        return False
    with connection.cursor() as cursor:  # one round trip: set_config('role') is SET ROLE
        cursor.execute(f"SELECT {enter_columns('%s')}", [int(project_id)])
    entered(project_id)
    return True


def enter_columns(project_column: str) -> str:
    """Select-list columns that do what :func:`enter` does for the project in ``project_column``,
    for a statement that reads that project anyway: the API-key lookup enters the tenant role in its
    own round trip (one fewer per API request), and only when a row matches. The caller then calls
    :func:`entered` with the project."""
    return f"set_config('{SETTING}', ({project_column})::text, false), set_config('role', '{ROLE}', false)"


def entered(project_id: int) -> None:
    """Record that this connection is confined to ``project_id`` (after :func:`enter_columns`)."""
    connection.memoryhub_tenant = int(project_id)  # type: ignore[attr-defined]


def leave() -> None:
    """Back to the connection's own role; a connection that cannot say so is closed."""
    if getattr(connection, "memoryhub_tenant", None) is None:
        return
    connection.memoryhub_tenant = None  # type: ignore[attr-defined]
    try:
        if connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute(f"RESET ROLE; SELECT set_config('{SETTING}', '', false)")
    except DatabaseError:
        log.warning("could not leave the tenant role; closing the connection")
        connection.close()


class RowSecurityMiddleware:
    """Leaves the tenant role after every request, whatever happened in it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        finally:
            leave()

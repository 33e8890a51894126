"""GET /export and POST /import: the key's project as JSON lines (integrations/transfer.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router, Schema

from common.auth import ERRORS, api_key
from common.errors import Invalid
from common.idempotency import idempotent
from integrations.transfer import export_lines as _export_lines
from integrations.transfer import import_lines

router = Router(tags=["transfer"])

NDJSON = "application/x-ndjson"


class ExportQuery(Schema):
    user_id: str | None = None
    conversations: bool = False


class ImportCounts(Schema):
    memories: int
    revisions: int
    links: int
    conversations: int
    messages: int


class ImportOut(Schema):
    imported: ImportCounts
    skipped: int
    rejected: list[dict[str, Any]]


@router.get(
    "/export",
    response={200: None, **ERRORS},
    openapi_extra={"responses": {200: {"description": "JSON lines", "content": {NDJSON: {"schema": {}}}}}},
)
def export(request: HttpRequest, query: Query[ExportQuery]) -> StreamingHttpResponse:
    """The key's project (or one user's part of it) as JSON lines: every version of every memory
    with its revisions, the links, and conversations when asked (docs/guide.md "Export and import")."""
    project = api_key(request).project
    lines = _export_lines(project=project, user_id=query.user_id, conversations=query.conversations)
    response = StreamingHttpResponse((line + "\n" for line in list(lines)), content_type=NDJSON)
    response["Content-Disposition"] = f'attachment; filename="{project.slug}.jsonl"'
    return response


@router.post(
    "/import",
    response={200: ImportOut, **ERRORS},
    openapi_extra={
        "requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string"}}}},
    },
)
@idempotent
def import_(request: HttpRequest) -> dict[str, Any]:
    """Import an export file (the body, JSON lines) into the key's project: every line is checked
    first; when any is rejected nothing is written and the answer is 422 ``import_rejected`` with
    each line's reason in ``details``. Rows the project already holds are skipped."""
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Invalid("the body is not UTF-8 text", code="import_rejected") from error
    result = import_lines(project=api_key(request).project, lines=text.splitlines(), actor="system:import")
    body = result.as_dict()
    if result.rejected:
        raise Invalid(
            f"{len(result.rejected)} line(s) rejected; nothing imported",
            code="import_rejected",
            details=body["rejected"][:1000],
        )
    return body

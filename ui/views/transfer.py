"""Export and import of the project's memory for its admins: the same JSON-lines file and the
same code as ``GET /export`` and ``POST /import`` (integrations/transfer.py)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import slugify

from integrations.transfer import ImportResult, export_lines, import_lines
from memories.models import Role
from ui.views.access import Access, is_htmx, page_context, project_view

TEMPLATE = "ui/transfer.html"
NDJSON = "application/x-ndjson"


class ExportForm(forms.Form):
    user = forms.CharField(required=False, max_length=255, label="Only this end user")
    conversations = forms.BooleanField(required=False, label="With conversations")


class ImportForm(forms.Form):
    file = forms.FileField(label="Export file (.jsonl)")

    def clean_file(self) -> list[str]:
        """The file's lines; refused when it is too large or not UTF-8 text."""
        upload = self.cleaned_data["file"]
        limit = settings.MEMORYHUB_MAX_BODY_BYTES
        if upload.size > limit:
            raise forms.ValidationError(f"the file is larger than {limit // (1024 * 1024)} MB")
        try:
            return str(upload.read().decode("utf-8")).splitlines()
        except UnicodeDecodeError as error:
            raise forms.ValidationError("the file is not UTF-8 text") from error


def _context(access: Access, **extra: Any) -> dict[str, Any]:
    defaults = {"export_form": ExportForm(), "import_form": ImportForm(), "nav": "transfer"}
    return page_context(access, **{**defaults, **extra})


@project_view(Role.ADMIN)
def transfer(request: HttpRequest, access: Access) -> HttpResponse:
    """GET: the export and import forms. POST: import the uploaded file and show the result:
    counts, or every rejected line with its reason (then nothing was written)."""
    if request.method != "POST":
        return render(request, TEMPLATE, _context(access))
    form = ImportForm(request.POST, request.FILES)
    template = f"{TEMPLATE}#result" if is_htmx(request) else TEMPLATE
    if not form.is_valid():
        return render(request, template, _context(access, import_form=form), status=422)
    result: ImportResult = import_lines(project=access.project, lines=form.cleaned_data["file"], actor=access.actor)
    context = _context(access, result=result, filename=getattr(request.FILES.get("file"), "name", ""))
    return render(request, template, context, status=422 if result.rejected else 200)


@project_view(Role.ADMIN)
def transfer_export(request: HttpRequest, access: Access) -> HttpResponse:
    """The project (or one end user's part of it) as a JSON-lines download."""
    form = ExportForm(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    user_id = (data.get("user") or "").strip() or None
    lines = export_lines(project=access.project, user_id=user_id, conversations=bool(data.get("conversations")))
    response = HttpResponse("".join(line + "\n" for line in lines), content_type=NDJSON)
    suffix = f"-{slugify(user_id)}" if user_id else ""
    response["Content-Disposition"] = f'attachment; filename="{access.project.slug}{suffix}.jsonl"'
    return response

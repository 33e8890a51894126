"""Forms of the curation UI. They parse and check input; the services decide and write."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.validators import UnicodeUsernameValidator

from memories.models import CapturePolicy, Kind, Project, Relationship, Role, Scope, Status
from retrieval.engine import default_min_score
from retrieval.llm import llm_configured
from ui.selectors import SORTS, ListFilters

SORT_LABELS = {
    "newest": "Newest first",
    "oldest": "Oldest first",
    "importance": "Most important",
    "updated": "Recently changed",
    "category": "Category",
}

BULK_ACTIONS = [
    ("approve", "Approve"),
    ("archive", "Archive"),
    ("delete", "Delete"),
    ("category", "Change category to…"),
]


def _blank(label: str, choices: Any) -> list[tuple[str, str]]:
    return [("", label), *[(str(value), str(name)) for value, name in choices]]


def _set_choices(form: forms.Form, name: str, choices: list[tuple[str, str]]) -> None:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    field.choices = choices


def _categories(project: Project) -> list[tuple[str, str]]:
    return [(c, c) for c in project.taxonomy]


class MemoryFilterForm(forms.Form):
    """The list's filters and sort, read from the query string."""

    user = forms.CharField(required=False, max_length=255, label="End user")
    scope = forms.ChoiceField(required=False, choices=_blank("Any scope", Scope.choices))
    kind = forms.ChoiceField(required=False, choices=_blank("Any kind", Kind.choices))
    category = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=_blank("Not deleted", Status.choices))
    q = forms.CharField(required=False, max_length=200, label="Text")
    sort = forms.ChoiceField(required=False, choices=[(k, SORT_LABELS[k]) for k in SORTS])

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _set_choices(self, "category", _blank("Any category", _categories(project)))

    def filters(self) -> ListFilters:
        """The valid filters; an invalid value is ignored rather than failing the page."""
        self.is_valid()
        data = {k: v for k, v in self.cleaned_data.items() if k not in self.errors}
        return ListFilters(
            user_id=(data.get("user") or "").strip(),
            scope=data.get("scope") or "",
            kind=data.get("kind") or "",
            category=data.get("category") or "",
            status=data.get("status") or "",
            q=(data.get("q") or "").strip(),
            sort=data.get("sort") or "newest",
        )


class MemoryFieldsForm(forms.Form):
    """Content and labels of a memory: used to edit one and to write a successor."""

    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=8000)
    kind = forms.ChoiceField(choices=Kind.choices)
    category = forms.ChoiceField(required=False)
    importance = forms.FloatField(min_value=0, max_value=1, widget=forms.NumberInput(attrs={"step": "0.05"}))
    reason = forms.CharField(required=False, max_length=500, label="Reason (kept in the history)")

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _set_choices(self, "category", _blank("uncategorised", _categories(project)))

    def changes(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in ("content", "kind", "category", "importance")}


class LinkForm(forms.Form):
    """A link to add. The target is picked by searching (no default): a click on "Add link"
    never links a memory nobody picked; whether the end user may see it is the view's check."""

    target = forms.UUIDField(label="Link to", error_messages={"required": "Search for a memory and pick one."})
    relationship = forms.ChoiceField(choices=[c for c in Relationship.choices if c[0] != Relationship.SUPERSEDES])


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=BULK_ACTIONS)
    category = forms.ChoiceField(required=False, label="New category")

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # No "(none)" here: an untouched select once cleared every ticked memory's category
        # by surprise. Clearing one category is an edit on the memory's own page.
        _set_choices(self, "category", _blank("Choose a category…", _categories(project)))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "category" and not data.get("category"):
            self.add_error("category", "Choose the new category.")
        return data


class ReviewFilterForm(forms.Form):
    """The review queue's filters, read from the query string (an invalid value is ignored)."""

    user = forms.CharField(required=False, max_length=255, label="End user")
    category = forms.ChoiceField(required=False)
    confidence = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any confidence"),
            ("low", "Low (below 0.5)"),
            ("medium", "Medium (0.5 to 0.8)"),
            ("high", "High (0.8 and above)"),
        ],
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _set_choices(self, "category", _blank("Any category", _categories(project)))

    def filters(self) -> dict[str, str]:
        """Keyword arguments for ``ui.selectors.review_queue``."""
        self.is_valid()
        data = {k: v for k, v in self.cleaned_data.items() if k not in self.errors}
        return {
            "user_id": (data.get("user") or "").strip(),
            "category": data.get("category") or "",
            "confidence": data.get("confidence") or "",
        }


class ProjectSettingsForm(forms.Form):
    capture_policy = forms.ChoiceField(choices=CapturePolicy.choices)
    auto_approve_confidence = forms.FloatField(
        min_value=0, max_value=1, widget=forms.NumberInput(attrs={"step": "0.05"}), label="Auto-approve confidence"
    )
    taxonomy = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 9}), help_text="One category per line: letters, digits and dashes."
    )
    hyde_enabled = forms.BooleanField(required=False, label="HyDE (hypothetical answers) on")
    token_budget = forms.IntegerField(min_value=1, max_value=100_000, label="Token budget")
    retrieval_rate_limit = forms.IntegerField(
        min_value=0, max_value=100_000, label="Rate limit", help_text="Retrievals per end user per minute; 0: no limit."
    )
    min_score = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.01"}),
        label="Relevance cut (min_score)",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["min_score"].help_text = (
            "Memories scoring below it are not returned, unless a request names its own. "
            f"Empty: the server default ({default_min_score():.2f})."
        )
        if not llm_configured():
            # The box says what runs: off, and not editable, while there is no LLM. The project's own
            # choice is kept (see changes()) and applies once one is configured.
            hyde = self.fields["hyde_enabled"]
            hyde.disabled = True
            kept = "on" if self.initial.get("hyde_enabled") else "off"
            self.initial = {**self.initial, "hyde_enabled": False}
            hyde.help_text = (
                "No LLM is configured (MEMORYHUB_LLM_BASE_URL or OPENAI_API_KEY), so HyDE does not run. "
                f"This project's setting ({kept}) applies once one is."
            )

    def changes(self) -> dict[str, Any]:
        """The cleaned settings to save: a field shown disabled keeps its stored value."""
        return {name: value for name, value in self.cleaned_data.items() if not self.fields[name].disabled}

    def clean_taxonomy(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["taxonomy"].splitlines() if line.strip()]
        bad = [c for c in lines if not all(ch.isalnum() or ch in "-_" for ch in c)]
        if bad:
            raise forms.ValidationError(f"not a category name: {', '.join(bad)}")
        if len(set(lines)) != len(lines):
            raise forms.ValidationError("a category is listed twice")
        if not lines:
            raise forms.ValidationError("list at least one category")
        return lines

    @classmethod
    def initial_for(cls, project: Project) -> dict[str, Any]:
        fields = (
            "capture_policy",
            "auto_approve_confidence",
            "hyde_enabled",
            "token_budget",
            "retrieval_rate_limit",
            "min_score",
        )
        return {**{name: getattr(project, name) for name in fields}, "taxonomy": "\n".join(project.taxonomy)}


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="What uses this key, e.g. “support bot”.")


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class PersonCreateForm(forms.Form):
    """A new person: a username (the user model's own rules) and their role in the team."""

    new_username = forms.CharField(
        max_length=150,
        label="Username",
        validators=[UnicodeUsernameValidator()],
        help_text="Letters, digits and @ . + - _ only.",
    )
    new_role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER, label="Role")


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)

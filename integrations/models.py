"""What an import brought in: the source's id for each row it created, so a re-run skips it."""

from __future__ import annotations

from django.db import models

from memories.models import Project


class ImportedRecord(models.Model):
    """One row an import created: its id in the export it came from and its id here.

    An export writes the source id for imported rows, so export -> import -> export gives the
    same ids, and a second import of the same file finds every row already present.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20)  # "memory" or "conversation"
    source_id = models.CharField(max_length=64)
    target_id = models.UUIDField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "kind", "source_id"], name="imported_unique_source"),
            models.UniqueConstraint(fields=["kind", "target_id"], name="imported_unique_target"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.source_id} -> {self.target_id}"

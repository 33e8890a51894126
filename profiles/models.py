"""Profiles: the standing facts about one end user of a project, rebuilt from their memories.
Rules live in services.py and builder.py; reads in selectors.py."""

from __future__ import annotations

from django.db import models

from memories.models import Project


class Profile(models.Model):
    """The current profile of (project, user_id). ``facts`` is ``[{"text", "memory_ids", "pinned"}]``;
    ``text`` is those facts as the lines injected into a prompt."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)
    text = models.TextField(blank=True, default="")
    facts = models.JSONField(default=list, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    # What a person decided in the UI and every rebuild keeps: facts written by hand (always
    # first) and the memories left out of the profile.
    pinned = models.JSONField(default=list, blank=True)
    hidden_memory_ids = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user_id"], name="profile_one_per_user")]

    def __str__(self) -> str:
        return f"profile of {self.user_id} (v{self.version})"


class ProfileVersion(models.Model):
    """Every version a profile had, with who made it (a rebuild or a person) and why."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    text = models.TextField(blank=True, default="")
    facts = models.JSONField(default=list, blank=True)
    pinned = models.JSONField(default=list, blank=True)
    hidden_memory_ids = models.JSONField(default=list, blank=True)
    actor = models.CharField(max_length=255)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "version"], name="profile_version_once")]
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"v{self.version} of {self.profile_id}"

from __future__ import annotations

from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    name = "profiles"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories import history
        from profiles.services import schedule_rebuild

        # Every memory change of a user queues one debounced rebuild of their profile.
        if schedule_rebuild not in history.after_user_change:
            history.after_user_change.append(schedule_rebuild)

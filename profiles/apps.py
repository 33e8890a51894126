from __future__ import annotations

from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    name = "profiles"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories import services
        from profiles.services import schedule_rebuild

        # Every memory change of a user queues one debounced rebuild of their profile.
        if schedule_rebuild not in services.after_user_change:
            services.after_user_change.append(schedule_rebuild)

"""The one reader of MemoryHub's configuration (docs/configuration.md).

Every environment variable is declared once, by the line of ``memoryhub/settings.py`` that
reads it, with its type, default and meaning::

    MEMORYHUB_MAX_BULK = env.integer("MEMORYHUB_MAX_BULK", 1000, "most memories in one bulk request (413 above)")

The value becomes the Django setting of the same name; code reads ``settings.MEMORYHUB_…``
and never repeats a default. Reading never raises: problems are collected, and
:meth:`Environment.check` (the last line of settings) raises one ``ImproperlyConfigured``
naming every bad value and every ``MEMORYHUB_*`` variable that is set but that nothing reads
(a misspelt name would otherwise be ignored without a word). Reading has no side effects:
no file is written and no server started (``serving.embedded.start_servers`` does that).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")
N = TypeVar("N", int, float)

PREFIX = "MEMORYHUB_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Variable:
    """One declared environment variable: what the table of docs/configuration.md lists."""

    name: str
    default: str
    meaning: str


class Environment:
    """Typed reads of one environment mapping, remembering what was declared and what was wrong."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, base_dir: Path) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.base_dir = base_dir
        self.variables: dict[str, Variable] = {}
        self.reserved: set[str] = set()
        self.errors: list[str] = []

    # --- typed readers ------------------------------------------------------------

    def text(self, name: str, default: str, meaning: str, *, shown: str | None = None) -> str:
        return self._read(name, default, meaning, str, shown=default if shown is None else shown)

    def secret(self, name: str, meaning: str, *, shown: str = "—") -> str:
        """A string that defaults to empty (its value never appears in an error: parsing cannot fail)."""
        return self._read(name, "", meaning, str, shown=shown)

    def integer(self, name: str, default: int, meaning: str, *, minimum: int | None = None) -> int:
        value = self._read(name, default, meaning, _parse_int, shown=str(default))
        return self._at_least(name, value, minimum, default)

    def number(self, name: str, default: float, meaning: str, *, minimum: float | None = None) -> float:
        value = self._read(name, default, meaning, _parse_float, shown=f"{default:g}")
        return self._at_least(name, value, minimum, default)

    def optional_number(self, name: str, meaning: str, *, shown: str = "") -> float | None:
        """A number, or ``None`` when unset or empty (the caller then decides)."""
        return self._read(name, None, meaning, _parse_float, shown=shown)

    def switch(self, name: str, default: bool, meaning: str) -> bool:
        return self._read(name, default, meaning, _parse_bool, shown="on" if default else "off")

    def choice(self, name: str, default: str, choices: tuple[str, ...], meaning: str) -> str:
        def parse(raw: str) -> str:
            if raw not in choices:
                raise ValueError(f"must be one of {', '.join(choices)}")
            return raw

        return self._read(name, default, meaning, parse, shown=default)

    def csv(self, name: str, default: list[str], meaning: str) -> list[str]:
        """Comma-separated values (blanks dropped)."""
        return self._read(name, default, meaning, _parse_list, shown=",".join(default) or "—")

    def path(self, name: str, default: str, meaning: str) -> Path:
        """A folder; a relative value is relative to the project root, never to the current directory."""

        def parse(raw: str) -> Path:
            path = Path(raw).expanduser()
            return path if path.is_absolute() else (self.base_dir / path).resolve()

        return self._read(name, parse(default), meaning, parse, shown=default)

    def reserve(self, *names: str) -> None:
        """Names that work in progress will read: setting them is not a typo.

        Replace a reserved name by a typed line (and a row in docs/configuration.md) when code starts reading it.
        """
        self.reserved.update(names)

    # --- validation -----------------------------------------------------------------

    def fail(self, message: str) -> None:
        """Record a problem that is not about one value's syntax (e.g. production needs X)."""
        self.errors.append(message)

    def unknown(self) -> list[str]:
        """``MEMORYHUB_*`` variables the environment sets that nothing declares."""
        known = set(self.variables) | self.reserved
        return sorted(name for name in self.environ if name.startswith(PREFIX) and name not in known)

    def check(self) -> None:
        """Raise one ImproperlyConfigured naming every problem found, if any."""
        problems = list(self.errors)
        for name in self.unknown():
            close = difflib.get_close_matches(name, [*self.variables, *self.reserved], n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{name} is set but is not a MemoryHub variable{hint}; see docs/configuration.md")
        if problems:
            raise ImproperlyConfigured("MemoryHub configuration:\n  - " + "\n  - ".join(problems))

    def _read(self, name: str, default: T, meaning: str, parse: Callable[[str], T], *, shown: str) -> T:
        if name in self.variables:
            raise ImproperlyConfigured(f"{name} is declared twice in settings")
        self.variables[name] = Variable(name=name, default=shown, meaning=meaning)
        self.reserved.discard(name)
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            return parse(raw.strip())
        except ValueError as error:
            self.errors.append(f"{name}={raw!r}: {error}")
            return default

    def _at_least(self, name: str, value: N, minimum: N | None, default: N) -> N:
        if minimum is not None and value < minimum:
            self.errors.append(f"{name}={value!r}: must be at least {minimum}")
            return default
        return value


# psycopg prepares a statement by itself after this many runs; Django's client-bound cursors never
# do, and common.prepared asks for each of its statements, so no statement is prepared by count.
# Django's own default, None, would refuse even those.
PREPARE_THRESHOLD = 2**31 - 1


def database_settings(url: str) -> dict[str, object]:
    """Django's DATABASES entry for a libpq URL, keeping the URL's own options.

    ``?sslmode=require``, ``sslrootcert=…`` or ``options=-c statement_timeout=…`` in
    ``DATABASE_URL`` reach libpq; MemoryHub adds a 5 s connect timeout unless the URL sets one.
    psycopg prepares only the statements ``common.prepared`` asks it to (``PREPARE_THRESHOLD``).
    """
    import dj_database_url

    config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=600, conn_health_checks=True))
    options = config.get("OPTIONS")
    config["OPTIONS"] = {
        "connect_timeout": 5,
        "prepare_threshold": PREPARE_THRESHOLD,
        **(options if isinstance(options, dict) else {}),
    }
    return config


def llm_configured() -> bool:
    """True when an LLM endpoint or API key is configured (otherwise capture and HyDE fall back),
    read at call time (False without Django settings)."""

    from django.conf import settings

    if not settings.configured:
        return False
    return bool(getattr(settings, "MEMORYHUB_LLM_BASE_URL", None) or getattr(settings, "OPENAI_API_KEY", None))


def load_settings() -> None:
    """Read and check the configuration now (entry points call this first): on a problem,
    print it and exit with status 2 instead of a traceback."""
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - the first access imports and checks the settings
    except ImproperlyConfigured as error:
        print(error, file=sys.stderr)
        raise SystemExit(2) from None


def _parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError("not a whole number") from None


def _parse_float(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError("not a number") from None


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("not a switch (use 1/0, true/false, yes/no, on/off)")


def _parse_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]

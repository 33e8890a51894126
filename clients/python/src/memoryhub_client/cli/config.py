"""Where the command line finds its server, key and user: the environment first, then the file
``memoryhub login`` writes (``~/.config/memoryhub/config.json``, readable by its owner only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

# Only for annotations: a hook process imports this module for every prompt, without typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

ENV = {"url": "MEMORYHUB_URL", "api_key": "MEMORYHUB_API_KEY", "user_id": "MEMORYHUB_USER"}


class UsageError(Exception):
    """Bad or missing input: a value the configuration lacks, a transcript of no known shape (exit 1)."""


class Config:
    """The server, the API key and the end user, each possibly empty until :meth:`require`.

    A plain class, neither a dataclass nor a ``typing.NamedTuple``: a hook process starts for
    every prompt, and importing either module costs it more than the rest of this one."""

    __slots__ = ("api_key", "url", "user_id")

    def __init__(self, url: str = "", api_key: str = "", user_id: str = "") -> None:
        self.url, self.api_key, self.user_id = url, api_key, user_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        # Never the key itself: a configuration may end up in a traceback in the hooks' log.
        return f"Config(url={self.url!r}, api_key={'<set>' if self.api_key else ''!r}, user_id={self.user_id!r})"

    def as_dict(self) -> dict[str, str]:
        return {"url": self.url, "api_key": self.api_key, "user_id": self.user_id}

    def require(self, *, user: bool = True) -> Config:
        """This configuration, or ``UsageError`` naming what is missing and how to set it."""
        missing = [name for name in ("url", "api_key", "user_id") if not getattr(self, name)]
        if not user and "user_id" in missing:
            missing.remove("user_id")
        if missing:
            names = ", ".join(ENV[name] for name in missing)
            raise UsageError(f"not configured: set {names} or run `memoryhub login`")
        return self


def config_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$MEMORYHUB_CONFIG``, else ``$XDG_CONFIG_HOME/memoryhub/config.json`` (``~/.config``)."""
    if env.get("MEMORYHUB_CONFIG"):
        return Path(env["MEMORYHUB_CONFIG"])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "memoryhub" / "config.json"


def load(env: Mapping[str, str] = os.environ) -> Config:
    """The file's values with every variable that is set in the environment over them."""
    path = config_path(env)
    stored: dict[str, str] = {}
    if path.exists():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot read {path}: {error}") from error
        if not isinstance(raw, dict):
            raise UsageError(f"{path} is not a JSON object")
        stored = {name: str(raw[name]) for name in ENV if isinstance(raw.get(name), str)}
    values = {name: env.get(variable) or stored.get(name, "") for name, variable in ENV.items()}
    return Config(**values)


def save(config: Config, env: Mapping[str, str] = os.environ) -> Path:
    """Write the file with mode 0600 (it holds an API key), replacing it whole."""
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(config.as_dict(), out, indent=2)
        out.write("\n")
    os.chmod(partial, 0o600)  # an older file's looser mode must not survive the rename
    partial.replace(path)
    return path

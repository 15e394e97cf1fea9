"""Words in every script: what a text is indexed as, and what a query looks for.

See `analyzer` for how texts are cut, `stemming` for word forms, `identify` for the
language of a text, `stopwords` for what a query leaves out.
"""

from .analyzer import MAX_TERMS, index_text, query_terms
from .languages import DEFAULT_LANGUAGE, LANGUAGES, chosen_language, language_error

__all__ = [
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "MAX_TERMS",
    "chosen_language",
    "index_text",
    "language_error",
    "query_terms",
]

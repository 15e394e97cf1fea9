"""Export and import of a scope's whole memory in chronomem's JSON Lines format (and
import of the reference MCP memory server's `memory.jsonl`).

`export` reads the records a page at a time; an import is checked whole first
(`records` for one line, `check` for all of them, spooled as `steps`), then written
a batch per transaction (`write`), driven by `importer`.
"""

from ..models import ExportRecord, ImportResult
from .check import BATCH_SIZE, CHUNK_LINES, text_lines
from .export import EXPORT_PAGE, export_line, export_lines, export_records
from .importer import MERGE_AFTER_ROWS, ImportSettings, import_lines

__all__ = [
    "BATCH_SIZE",
    "CHUNK_LINES",
    "EXPORT_PAGE",
    "MERGE_AFTER_ROWS",
    "ExportRecord",
    "ImportResult",
    "ImportSettings",
    "export_line",
    "export_lines",
    "export_records",
    "import_lines",
    "text_lines",
]

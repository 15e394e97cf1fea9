"""The README's examples are code that runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README shows how to use the engine"
    for index, block in enumerate(blocks):
        script = tmp_path / f"example_{index}.py"
        script.write_text(block)
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"README example {index} failed:\n{done.stderr}"

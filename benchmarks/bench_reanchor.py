"""Benchmark: moving findings' anchors to a new revision of a long doc.

    python benchmarks/bench_reanchor.py [--sentences 3000] [--findings 1900] [--edits phrase,line,mixed]

Builds a Markdown doc of N sentences (about 75 characters each, one sentence
per line, paragraphs between headings) in which one phrase recurs as a whole
sentence every few sentences, anchors findings on random sentences (the
recurring one included), then re-anchors every finding after each edit:

``phrase``  one word changed in one occurrence of the recurring sentence;
``line``    one line rewritten and one line inserted in the middle of the doc;
``mixed``   paragraphs inserted near the top, one sentence in ten reworded, one
            in twenty deleted.

For each edit it prints the wall time (the diff of the two texts included, as a
worker pays it once per revision), the time per finding, how many findings were
placed exactly, fuzzily or orphaned, how many landed somewhere else than where
the edit put their quote, and the machine. Timing decides nothing here; it is
reported (the target is 1,900 findings on a 3,000-sentence doc in under 30 s).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewer.text.anchoring import Anchor, anchor_at, reanchor  # noqa: E402

WORDS = ["dispatcher", "queue", "batch", "worker", "gateway", "token", "request", "latency", "host", "unit",
         "standby", "failover", "client", "timeout", "retry", "backlog", "capacity", "peak", "average", "model",
         "share", "round", "robin", "pull"]
REPEATED = "Each worker runs one batch at a time and returns it to the gateway."
REPEAT_EVERY = 7


@dataclass
class Doc:
    """A doc as lines, and where each sentence (one per line) is."""

    lines: list[str]

    @property
    def text(self) -> str:
        return "".join(self.lines)


@dataclass
class Edit:
    """A revision: its text, and where each quoted sentence of the old text should now be."""

    name: str
    new: str
    # old start -> (new start, new quote), or None when the quote was deleted.
    truth: Callable[[Anchor], tuple[int, str] | None]


def _sentence(rng: random.Random, i: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 10))]
    return f"S{i}: " + " ".join(words).capitalize() + "."


def build_doc(rng: random.Random, sentences: int) -> Doc:
    """One sentence per line; a heading every 40 sentences; the recurring sentence every few."""
    lines: list[str] = []
    for i in range(sentences):
        if i % 40 == 0:
            lines.append(f"\n## Part {i // 40 + 1}\n\n")
        elif i % 5 == 0:
            lines.append("\n")
        lines.append((REPEATED if i % REPEAT_EVERY == 3 else _sentence(rng, i)) + "\n")
    return Doc(lines)


def _line_starts(lines: list[str]) -> list[int]:
    starts, total = [], 0
    for line in lines:
        starts.append(total)
        total += len(line)
    return starts


def phrase_edit(doc: Doc) -> Edit:
    """One word changed in the middle occurrence of the recurring sentence."""
    repeats = [k for k, line in enumerate(doc.lines) if line == REPEATED + "\n"]
    k = repeats[len(repeats) // 2]
    changed = REPEATED.replace("one batch", "two batch") + "\n"
    lines = doc.lines[:k] + [changed] + doc.lines[k + 1:]
    at = _line_starts(doc.lines)[k]

    def truth(a: Anchor) -> tuple[int, str] | None:
        if a.start == at:
            return at, changed.rstrip("\n")
        return a.start, a.exact

    return Edit("one word changed in a repeated phrase", "".join(lines), truth)


def line_edit(doc: Doc, rng: random.Random) -> Edit:
    """One line in the middle rewritten, and a new line inserted a little after it."""
    k = len(doc.lines) // 2
    while doc.lines[k] == "\n" or doc.lines[k].startswith("\n") or doc.lines[k] == REPEATED + "\n":
        k += 1
    rewritten = "A line rewritten from start to end, about the standby's failover time.\n"
    inserted = "An inserted line: the gateway retries a request once after a timeout.\n"
    m = k + 3
    lines = doc.lines[:k] + [rewritten] + doc.lines[k + 1:m] + [inserted] + doc.lines[m:]
    starts = _line_starts(doc.lines)
    shift_k = len(rewritten) - len(doc.lines[k])

    def truth(a: Anchor) -> tuple[int, str] | None:
        if a.start == starts[k]:
            return None  # its sentence is gone
        if a.start < starts[k]:
            return a.start, a.exact
        if a.start < starts[m]:
            return a.start + shift_k, a.exact
        return a.start + shift_k + len(inserted), a.exact

    return Edit("one line rewritten and one inserted", "".join(lines), truth)


def mixed_edit(doc: Doc, rng: random.Random) -> Edit:
    """Paragraphs inserted near the top, one sentence in ten reworded, one in twenty deleted."""
    out: list[str] = []
    truth_at: dict[int, tuple[int, str] | None] = {}
    top = "".join(_sentence(rng, 100000 + i) + "\n" for i in range(20)) + "\n"
    total = len(top)
    for old_at, line in zip(_line_starts(doc.lines), doc.lines, strict=True):
        body = line.rstrip("\n")
        plain = bool(body) and body != REPEATED and not line.startswith("\n")
        roll = rng.random()
        if plain and roll < 0.05:
            truth_at[old_at] = None
            continue
        if plain and roll < 0.15:
            line = body.replace("queue", "backlog", 1).replace("batch", "bunch", 1) + "\n"
        truth_at[old_at] = (total, line.rstrip("\n"))
        out.append(line)
        total += len(line)

    def truth(a: Anchor) -> tuple[int, str] | None:
        return truth_at.get(a.start, (a.start, a.exact))

    return Edit("inserted, reworded and deleted sentences", top + "".join(out), truth)


def run(edit: Edit, old: str, anchors: list[Anchor]) -> dict[str, float | int]:
    outcomes = {"exact": 0, "fuzzy": 0, "orphaned": 0}
    wrong = 0
    started = time.perf_counter()
    for anchor in anchors:
        placed = reanchor(anchor, old, edit.new)
        outcomes["orphaned" if placed is None else placed.method] += 1
        want = edit.truth(anchor)
        if want is None:
            wrong += placed is not None
        elif placed is None or (placed.anchor.start, placed.anchor.exact) != want:
            wrong += 1
    total = time.perf_counter() - started
    return {**outcomes, "wrong": wrong, "total_s": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--findings", type=int, default=1900)
    parser.add_argument("--edits", default="phrase,line")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    doc = build_doc(rng, args.sentences)
    old = doc.text
    starts = _line_starts(doc.lines)
    quotable = [(s, line.rstrip("\n")) for s, line in zip(starts, doc.lines, strict=True)
                if line.strip() and not line.startswith("\n")]
    chosen = rng.sample(quotable, min(args.findings, len(quotable)))
    # The occurrence of the recurring sentence that the phrase edit changes is always quoted.
    repeats = [q for q in quotable if q[1] == REPEATED]
    middle = repeats[len(repeats) // 2]
    if middle not in chosen:
        chosen[0] = middle
    anchors = [anchor_at(old, s, s + len(q)) for s, q in chosen]
    on_repeat = sum(a.exact == REPEATED for a in anchors)

    print(f"doc: {args.sentences:,} sentences, {len(old):,} characters ({len(old.encode()) / 1024:.0f} KB), "
          f"{len(doc.lines):,} lines; the sentence {REPEATED!r} recurs {old.count(REPEATED)} times")
    print(f"findings: {len(anchors):,} ({on_repeat} of them on the recurring sentence)")
    makers = {"phrase": lambda: phrase_edit(doc), "line": lambda: line_edit(doc, rng),
              "mixed": lambda: mixed_edit(doc, rng)}
    for name in args.edits.split(","):
        edit = makers[name]()
        r = run(edit, old, anchors)
        per_ms = 1000 * float(r["total_s"]) / max(1, len(anchors))
        print(f"edit: {edit.name}: {r['total_s']:.2f} s ({per_ms:.2f} ms per finding); "
              f"exact {r['exact']}, fuzzy {r['fuzzy']}, orphaned {r['orphaned']}; wrong {r['wrong']}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.platform()}")


if __name__ == "__main__":
    main()

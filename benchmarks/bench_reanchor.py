"""Benchmark: moving findings' anchors to a new revision of a long doc.

    python benchmarks/bench_reanchor.py [--paragraphs 400] [--findings 200]

Builds a doc of N paragraphs, anchors findings on random sentences, then makes
a realistic revision (paragraphs inserted near the top, one sentence in ten
reworded, one in twenty deleted) and re-anchors every finding. Prints the doc
size, wall time per finding for exact and fuzzy placements, how many findings
were placed exactly, fuzzily or orphaned, and the machine. Timing decides
nothing here; it is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewer.text.anchoring import anchor_at, reanchor  # noqa: E402

WORDS = ["dispatcher", "queue", "batch", "worker", "gateway", "token", "request", "latency", "host", "unit", "standby", "failover", "client", "timeout", "retry", "backlog", "capacity", "peak", "average", "model", "share", "round", "robin", "pull"]


def _sentence(rng: random.Random, i: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
    return f"Sentence {i}: " + " ".join(words).capitalize() + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=400)
    parser.add_argument("--findings", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    paragraphs = [[_sentence(rng, p * 10 + s) for s in range(4)] for p in range(args.paragraphs)]
    old = "\n\n".join(" ".join(p) for p in paragraphs) + "\n"
    sentences = [s for p in paragraphs for s in p]
    chosen = rng.sample(sentences, min(args.findings, len(sentences)))
    anchors = [anchor_at(old, old.index(s), old.index(s) + len(s)) for s in chosen]

    reworded: dict[str, str] = {}
    deleted: set[str] = set()
    new_paragraphs = []
    for p in paragraphs:
        kept = []
        for s in p:
            roll = rng.random()
            if roll < 0.05:
                deleted.add(s)
                continue
            if roll < 0.15:
                changed = s.replace("queue", "backlog", 1).replace("batch", "bunch", 1)
                if changed != s:
                    reworded[s] = changed
                    s = changed
            kept.append(s)
        new_paragraphs.append(" ".join(kept))
    inserted = [" ".join(_sentence(rng, 100000 + i) for _ in range(3)) for i in range(20)]
    new = "\n\n".join(inserted + new_paragraphs) + "\n"

    outcomes = {"exact": 0, "fuzzy": 0, "orphaned": 0}
    times = {"exact": 0.0, "fuzzy": 0.0, "orphaned": 0.0}
    wrong = 0
    started = time.perf_counter()
    for anchor in anchors:
        t0 = time.perf_counter()
        placed = reanchor(anchor, old, new)
        kind = "orphaned" if placed is None else placed.method
        outcomes[kind] += 1
        times[kind] += time.perf_counter() - t0
        # Right: the sentence (or its rewording) where it now is; orphaned iff it was deleted.
        if anchor.exact in deleted:
            wrong += placed is not None
        elif placed is None:
            wrong += 1
        else:
            expected = reworded.get(anchor.exact, anchor.exact)
            wrong += placed.anchor.exact != expected
    total = time.perf_counter() - started

    print(f"doc: {len(old):,} chars before, {len(new):,} after; {len(anchors)} findings")
    print(f"edits: {len(inserted)} paragraphs inserted at the top, {len(set(reworded) & set(chosen))} quoted "
          f"sentences reworded, {len(deleted & set(chosen))} quoted sentences deleted")
    for kind in outcomes:
        n = outcomes[kind]
        per = f"{1000 * times[kind] / n:.2f} ms each" if n else "-"
        print(f"  {kind:9s} {n:4d}  {per}")
    print(f"wrong placements or wrong orphans: {wrong}")
    print(f"total: {total:.3f} s ({1000 * total / max(1, len(anchors)):.2f} ms per finding)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.platform()}")


if __name__ == "__main__":
    main()

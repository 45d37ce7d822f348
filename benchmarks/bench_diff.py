"""Benchmark: the revision diff on large docs.

    python benchmarks/bench_diff.py [--sentences 20000]

Builds a doc of N sentences (about 60 characters each: 20,000 sentences is
about 1.2 MB) and times :func:`reviewer.text.diffing.diff_texts` on three kinds of
revision: a few sentences edited in place, every tenth sentence rewritten, and
the whole doc rewritten (nothing in common: shown unsearched past DIFF_MAX_SEGMENTS). Prints
wall time, rows, whether the cap cut the diff, and the machine. Timing decides
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

from reviewer.text.diffing import MAX_SEGMENTS, diff_texts  # noqa: E402

WORDS = ["batch", "worker", "queue", "dispatcher", "gateway", "host", "unit", "token", "latency", "request", "answer", "model", "standby", "failover", "backlog", "client", "socket"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + "."


def doc(n: int, rng: random.Random) -> list[str]:
    return [sentence(rng) for _ in range(n)]


def lines(sentences: list[str]) -> str:
    # Paragraphs of four sentences, as prose is written.
    return "\n\n".join(" ".join(sentences[i:i + 4]) for i in range(0, len(sentences), 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(1)
    base = doc(args.sentences, rng)
    old = lines(base)
    few = list(base)
    for i in rng.sample(range(len(few)), 5):
        few[i] = few[i].replace(".", " now.")
    tenth = [s.replace(".", " changed.") if i % 10 == 0 else s for i, s in enumerate(base)]
    rewritten = doc(args.sentences, random.Random(2))
    print(f"doc: {args.sentences:,} sentences, {len(old):,} characters; cap {MAX_SEGMENTS:,} segments a side")
    for name, new in (("5 sentences edited", few), ("every 10th sentence edited", tenth),
                      ("whole doc rewritten", rewritten)):
        text = lines(new)
        start = time.perf_counter()
        result = diff_texts(old, text)
        wall = time.perf_counter() - start
        print(f"{name:28s} {wall * 1000:9.1f} ms  rows {len(result.rows):7,}  "
              f"compared {result.compared[0]:,}/{result.compared[1]:,}  truncated {result.truncated}  "
              f"{result.stats()}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


if __name__ == "__main__":
    main()

"""Where each piece of an old text is in a new one: an anchored diff by sentence, in near-linear time.

Pure Python (difflib only). Both texts are cut into segments that cover them
without gaps: each line, and within a line each sentence with the blanks that
follow it. The segment lists are compared the way patience and histogram diffs
do: segments found exactly once in each (compared by their hash, as dict
keys) and in the same order anchor the comparison; the stretches between two
anchors are compared again the same way, and only a stretch small enough to be
cheap goes to :class:`difflib.SequenceMatcher`. A large stretch without any
unique segment on both sides (a region of repeated lines, all changed) is
taken as replaced, position by position.

difflib over the whole lists costs, with ``autojunk`` off, about the product
of their lengths whenever lines repeat (blank lines, a recurring sentence);
this costs about their sum.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

# A stretch with at most this many pairs of segments to compare goes to difflib.
DIFFLIB_PAIRS = 4096
# Nested anchoring rounds before a stretch is taken as replaced.
MAX_DEPTH = 12

# A segment ends after a newline, or after the blanks that follow a sentence's end.
_CUT = re.compile(r"\n|(?<=[.!?])[ \t]+")

Opcode = tuple[str, int, int, int, int]


def segments(text: str) -> list[str]:
    """``text`` cut into lines and sentences; ``"".join(segments(text)) == text``."""
    out: list[str] = []
    at = 0
    for match in _CUT.finditer(text):
        out.append(text[at:match.end()])
        at = match.end()
    if at < len(text):
        out.append(text[at:])
    return out


def opcodes(old: list[str], new: list[str]) -> list[Opcode]:
    """difflib-style opcodes (``equal``, ``replace``, ``delete``, ``insert``) turning ``old`` into ``new``."""
    pairs: list[tuple[int, int, int]] = []  # (old start, new start, length) of equal runs
    _match(old, new, 0, len(old), 0, len(new), 0, pairs)
    codes: list[Opcode] = []
    i = j = 0
    for a, b, size in pairs:
        if size == 0:
            continue
        if a > i or b > j:
            codes.append((_tag(a - i, b - j), i, a, j, b))
        if codes and codes[-1][0] == "equal" and codes[-1][2] == a and codes[-1][4] == b:
            _, i1, _, j1, _ = codes.pop()
            codes.append(("equal", i1, a + size, j1, b + size))
        else:
            codes.append(("equal", a, a + size, b, b + size))
        i, j = a + size, b + size
    if i < len(old) or j < len(new):
        codes.append((_tag(len(old) - i, len(new) - j), i, len(old), j, len(new)))
    return codes


def _tag(old_n: int, new_n: int) -> str:
    return "replace" if old_n and new_n else "delete" if old_n else "insert"


def _match(old: list[str], new: list[str], alo: int, ahi: int, blo: int, bhi: int, depth: int,
           out: list[tuple[int, int, int]]) -> None:
    """Append the equal runs of ``old[alo:ahi]`` and ``new[blo:bhi]``, in order."""
    # The shared head and tail first: most of a revision is unchanged.
    head = 0
    while alo + head < ahi and blo + head < bhi and old[alo + head] == new[blo + head]:
        head += 1
    if head:
        out.append((alo, blo, head))
        alo, blo = alo + head, blo + head
    tail = 0
    while ahi - tail > alo and bhi - tail > blo and old[ahi - tail - 1] == new[bhi - tail - 1]:
        tail += 1
    ahi_inner, bhi_inner = ahi - tail, bhi - tail
    if alo < ahi_inner and blo < bhi_inner:
        _match_middle(old, new, alo, ahi_inner, blo, bhi_inner, depth, out)
    if tail:
        out.append((ahi_inner, bhi_inner, tail))


def _match_middle(old: list[str], new: list[str], alo: int, ahi: int, blo: int, bhi: int, depth: int,
                  out: list[tuple[int, int, int]]) -> None:
    if (ahi - alo) * (bhi - blo) <= DIFFLIB_PAIRS:
        matcher = SequenceMatcher(None, old[alo:ahi], new[blo:bhi], autojunk=False)
        out.extend((alo + m.a, blo + m.b, m.size) for m in matcher.get_matching_blocks() if m.size)
        return
    anchors = unique_anchors(old, new, alo, ahi, blo, bhi) if depth < MAX_DEPTH else []
    if not anchors:
        return  # nothing to hold on to: the stretch counts as replaced
    i, j = alo, blo
    for a, b in anchors:
        if a > i and b > j:
            _match(old, new, i, a, j, b, depth + 1, out)
        out.append((a, b, 1))
        i, j = a + 1, b + 1
    if i < ahi and j < bhi:
        _match(old, new, i, ahi, j, bhi, depth + 1, out)


def unique_anchors(old: list[str], new: list[str], alo: int, ahi: int, blo: int,
                    bhi: int) -> list[tuple[int, int]]:
    """Segments found once in each stretch, in the longest order both agree on (patience sorting)."""
    old_count = Counter(old[alo:ahi])
    new_count = Counter(new[blo:bhi])
    new_at = {new[j]: j for j in range(blo, bhi) if new_count[new[j]] == 1}
    pairs = [(i, new_at[old[i]]) for i in range(alo, ahi) if old_count[old[i]] == 1 and old[i] in new_at]
    tails: list[int] = []  # the smallest last new position of an increasing run of each length
    tail_at: list[int] = []
    back = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[length] = j
            tail_at[length] = k
        back[k] = tail_at[length - 1] if length else -1
    run: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


@dataclass(frozen=True)
class TextDiff:
    """The sentence diff of two texts, with where each segment starts in its text."""

    opcodes: tuple[Opcode, ...]
    old_starts: tuple[int, ...]
    new_starts: tuple[int, ...]
    old_length: int
    new_length: int

    def segment_at(self, offset: int) -> int:
        """The index of the old segment holding character ``offset``."""
        return bisect.bisect_right(self.old_starts, offset) - 1

    def opcode_at(self, segment: int) -> Opcode | None:
        """The opcode covering old segment ``segment`` (an insertion covers none)."""
        # Opcodes are in order of their old start; an insertion before a segment
        # has the same start as the opcode covering it, and comes first.
        k = bisect.bisect_right(self.opcodes, segment, key=lambda op: op[1]) - 1
        if k < 0:
            return None
        op = self.opcodes[k]
        return op if op[1] <= segment < op[2] else None


def _starts(parts: list[str]) -> tuple[int, ...]:
    starts = []
    total = 0
    for part in parts:
        starts.append(total)
        total += len(part)
    return tuple(starts)


@lru_cache(maxsize=16)
def text_diff(old_text: str, new_text: str) -> TextDiff:
    """The sentence diff of two texts; cached, as every finding moved to a revision needs the same one."""
    old, new = segments(old_text), segments(new_text)
    return TextDiff(opcodes=tuple(opcodes(old, new)), old_starts=_starts(old), new_starts=_starts(new),
                    old_length=len(old_text), new_length=len(new_text))

"""The diff of two texts at sentence granularity, bounded in size.

Pure Python (difflib only), like :mod:`reviewer.anchoring`. A text is cut into
segments: each non-blank line, and within a line each sentence. The two lists
of segments are compared with :class:`difflib.SequenceMatcher`; a replaced
pair of sentences is compared again word by word, so the page can mark the
words that changed.

Docs can be megabytes, and comparing two long lists of segments costs up to
the product of their lengths. The segments the two texts share at the start
and at the end are set aside first (a revision usually changes a few places);
of what remains, at most ``max_segments`` segments of each side are compared,
and the answer says so (``truncated``) when the cap cut anything off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

# Segments of each side compared at most, after the shared start and end are set aside.
MAX_SEGMENTS = 4000
# Unchanged segments shown around each change; longer runs are folded.
CONTEXT_SEGMENTS = 2

# A sentence ends at ., ! or ? followed by white space (the space stays outside it),
# but not the marker of a numbered list item ("1. ", "a) ") at the start of a line.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]\s+)?(?:\d+|[A-Za-z])[.)]$")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Segment:
    """A sentence (or a line without one) of a text: ``text[start:end]``."""

    start: int
    end: int
    text: str


@dataclass
class Row:
    """One row of the diff: an unchanged, deleted, inserted or replaced segment, or a fold.

    ``op`` is ``equal``, ``delete``, ``insert``, ``replace`` or ``skip`` (a run of
    ``skipped`` unchanged segments folded away). ``old_changes``/``new_changes``
    are the character ranges (in the side's text) of the words that changed.
    """

    op: str
    old: Segment | None = None
    new: Segment | None = None
    skipped: int = 0
    old_changes: list[tuple[int, int]] = field(default_factory=list)
    new_changes: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class TextDiff:
    """The rows of a diff, and whether the size cap cut it short."""

    rows: list[Row]
    old_segments: list[Segment]
    new_segments: list[Segment]
    truncated: bool = False
    compared: tuple[int, int] = (0, 0)

    def stats(self) -> dict[str, int]:
        """How many segments were deleted, inserted and replaced."""
        counts = {"deleted": 0, "inserted": 0, "replaced": 0}
        for row in self.rows:
            if row.op == "delete":
                counts["deleted"] += 1
            elif row.op == "insert":
                counts["inserted"] += 1
            elif row.op == "replace":
                counts["replaced"] += 1
        return counts


def _sentence_spans(line: str) -> list[tuple[int, int]]:
    """Start and end of each sentence of one line; a list item's number stays with its item."""
    spans: list[tuple[int, int]] = []
    start = 0
    for gap in _SENTENCE_END.finditer(line):
        if start == 0 and _LIST_MARKER.match(line[:gap.start()]):
            continue
        spans.append((start, gap.start()))
        start = gap.end()
    spans.append((start, len(line)))
    return spans


def segments(text: str) -> list[Segment]:
    """The text's sentences, line by line; blank lines give none."""
    out: list[Segment] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        for a, b in _sentence_spans(body):
            piece = body[a:b]
            stripped = piece.strip()
            if not stripped:
                continue
            begin = offset + a + len(piece) - len(piece.lstrip())
            out.append(Segment(begin, begin + len(stripped), stripped))
        offset += len(line)
    return out


def _word_changes(old: Segment, new: Segment) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character ranges of the words that differ between two sentences."""
    old_words = [(m.start() + old.start, m.end() + old.start, m.group()) for m in _WORD.finditer(old.text)]
    new_words = [(m.start() + new.start, m.end() + new.start, m.group()) for m in _WORD.finditer(new.text)]
    matcher = SequenceMatcher(None, [w[2] for w in old_words], [w[2] for w in new_words], autojunk=False)
    old_ranges: list[tuple[int, int]] = []
    new_ranges: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            old_ranges.append((old_words[i1][0], old_words[i2 - 1][1]))
        if j2 > j1:
            new_ranges.append((new_words[j1][0], new_words[j2 - 1][1]))
    return old_ranges, new_ranges


# Paired sentences less alike than this are shown as deleted and inserted, not changed.
MIN_CHANGED_SIMILARITY = 0.4


def _alike(old: str, new: str) -> bool:
    return SequenceMatcher(None, old, new, autojunk=False).ratio() >= MIN_CHANGED_SIMILARITY


# Replaced blocks up to this many sentence pairs are paired by likeness; larger
# ones (a section rewritten) position by position, to bound the cost.
MAX_PAIRING = 10_000


def _changed(o: Segment, n: Segment) -> Row:
    old_changes, new_changes = _word_changes(o, n)
    return Row(op="replace", old=o, new=n, old_changes=old_changes, new_changes=new_changes)


def _pair(olds: list[Segment], news: list[Segment]) -> list[Row]:
    """Rows for a replaced block: each old sentence paired, in order, with the next alike new one.

    A sentence with no alike partner is a deletion (or an insertion): a
    rewritten sentence next to a removed one reads as one change and one
    removal, not as two unrelated changes.
    """
    rows: list[Row] = []
    if len(olds) * len(news) > MAX_PAIRING:
        for k in range(max(len(olds), len(news))):
            o = olds[k] if k < len(olds) else None
            n = news[k] if k < len(news) else None
            if o is not None and n is not None and _alike(o.text, n.text):
                rows.append(_changed(o, n))
                continue
            if o is not None:
                rows.append(Row(op="delete", old=o))
            if n is not None:
                rows.append(Row(op="insert", new=n))
        return rows
    cursor = 0
    for o in olds:
        match = next((k for k in range(cursor, len(news)) if _alike(o.text, news[k].text)), None)
        if match is None:
            rows.append(Row(op="delete", old=o))
            continue
        rows += [Row(op="insert", new=n) for n in news[cursor:match]]
        rows.append(_changed(o, news[match]))
        cursor = match + 1
    rows += [Row(op="insert", new=n) for n in news[cursor:]]
    return rows


def _fold(rows: list[Row], context: int) -> list[Row]:
    """Fold runs of unchanged rows, keeping ``context`` rows next to each change."""
    out: list[Row] = []
    i = 0
    while i < len(rows):
        if rows[i].op != "equal":
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < len(rows) and rows[j].op == "equal":
            j += 1
        run = rows[i:j]
        head = context if i > 0 else 0
        tail = context if j < len(rows) else 0
        if len(run) <= head + tail + 1:
            out.extend(run)
        else:
            out.extend(run[:head])
            out.append(Row(op="skip", skipped=len(run) - head - tail))
            out.extend(run[len(run) - tail:] if tail else [])
        i = j
    return out


def diff_texts(
    old_text: str, new_text: str, *, max_segments: int = MAX_SEGMENTS, context: int = CONTEXT_SEGMENTS
) -> TextDiff:
    """Compare two texts sentence by sentence; unchanged runs folded, the middle capped."""
    old_segs, new_segs = segments(old_text), segments(new_text)
    old_keys = [s.text for s in old_segs]
    new_keys = [s.text for s in new_segs]
    # The shared start and end cost nothing to find and need no matcher.
    lead = 0
    limit = min(len(old_keys), len(new_keys))
    while lead < limit and old_keys[lead] == new_keys[lead]:
        lead += 1
    trail = 0
    while trail < limit - lead and old_keys[-1 - trail] == new_keys[-1 - trail]:
        trail += 1
    old_mid = old_segs[lead:len(old_segs) - trail]
    new_mid = new_segs[lead:len(new_segs) - trail]
    truncated = len(old_mid) > max_segments or len(new_mid) > max_segments
    old_cmp, new_cmp = old_mid[:max_segments], new_mid[:max_segments]

    rows: list[Row] = [Row(op="equal", old=o, new=n) for o, n in zip(old_segs[:lead], new_segs[:lead], strict=True)]
    matcher = SequenceMatcher(None, [s.text for s in old_cmp], [s.text for s in new_cmp], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [Row(op="equal", old=o, new=n) for o, n in zip(old_cmp[i1:i2], new_cmp[j1:j2], strict=True)]
        elif tag == "delete":
            rows += [Row(op="delete", old=o) for o in old_cmp[i1:i2]]
        elif tag == "insert":
            rows += [Row(op="insert", new=n) for n in new_cmp[j1:j2]]
        else:
            rows += _pair(old_cmp[i1:i2], new_cmp[j1:j2])
    if not truncated:
        rows += [Row(op="equal", old=o, new=n)
                 for o, n in zip(old_segs[len(old_segs) - trail:], new_segs[len(new_segs) - trail:], strict=True)]
    return TextDiff(
        rows=_fold(rows, context),
        old_segments=old_segs,
        new_segments=new_segs,
        truncated=truncated,
        compared=(len(old_cmp), len(new_cmp)),
    )


def pieces(segment: Segment, marks: list[tuple[int, int, Any]]) -> list[tuple[str, list[Any]]]:
    """Cut a segment's text at every mark's edges: ``(text, labels covering it)`` in order.

    ``marks`` are ``(start, end, label)`` in the text's offsets; parts outside
    the segment are ignored. Used to draw changed words and findings' quotes.
    """
    cuts = {segment.start, segment.end}
    inside = []
    for start, end, label in marks:
        s, e = max(start, segment.start), min(end, segment.end)
        if s < e:
            cuts.update((s, e))
            inside.append((s, e, label))
    edges = sorted(cuts)
    out: list[tuple[str, list[Any]]] = []
    for a, b in zip(edges, edges[1:], strict=False):
        labels = [label for s, e, label in inside if s <= a and b <= e]
        out.append((segment.text[a - segment.start:b - segment.start], labels))
    return out

"""The diff of two texts at sentence granularity, bounded in size.

Pure Python (difflib only), like :mod:`reviewer.text.anchoring`. A text is read as
Markdown and cut into segments: each sentence of a paragraph or list item (whatever
its source line breaks), each heading, each table row and code line. The two lists
of segments are compared with :class:`difflib.SequenceMatcher`; a replaced
pair of sentences is compared again word by word, so the page can mark the
words that changed.

Docs can be megabytes, and difflib's cost grows with the product of the
lengths it compares. Sentences that occur once in each text, in the same
order, anchor the comparison (as patience diff does); only the stretches
between anchors go to difflib, and a stretch longer than ``max_segments`` on
either side is shown position by position instead of searched, and the
answer says so (``truncated``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from reviewer.text.sentence_diff import unique_anchors

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
    """A sentence (or a heading, table row or code line) of a text: ``text[start:end]``.

    ``kind`` is the Markdown block it is in: ``p``, ``h1`` to ``h6``, ``li``, ``quote``,
    ``table`` or ``code``. ``key`` is what the diff compares: the text with its white
    space collapsed, so re-wrapping a paragraph changes nothing.
    """

    start: int
    end: int
    text: str
    kind: str = "p"

    @property
    def key(self) -> str:
        return " ".join(self.text.split())


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


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})(\s|$)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_QUOTE = re.compile(r"^\s{0,3}>")
_TABLE = re.compile(r"^\s*\|")


def _blocks(text: str) -> list[tuple[int, int, str]]:
    """The Markdown blocks of ``text`` as ``(start, end, kind)``: a paragraph or list
    item runs over its source lines; headings, quote lines, table rows and code lines
    are a block each."""
    blocks: list[tuple[int, int, str]] = []
    current: list[Any] | None = None  # the paragraph or list item being extended
    offset = 0
    fenced = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        start, offset = offset, offset + len(line)
        end = start + len(body)
        if _FENCE.match(body) or fenced:
            if _FENCE.match(body):
                fenced = not fenced
            if body.strip():
                blocks.append((start, end, "code"))
            current = None
            continue
        if not body.strip():
            current = None
            continue
        heading = _HEADING.match(body)
        single = f"h{len(heading.group(1))}" if heading else (
            "quote" if _QUOTE.match(body) else "table" if _TABLE.match(body) else None)
        if single is not None:
            blocks.append((start, end, single))
            current = None
        elif current is not None and not _ITEM.match(body):
            current[1] = end
            blocks[-1] = (current[0], current[1], current[2])
        else:
            current = [start, end, "li" if _ITEM.match(body) else "p"]
            blocks.append((start, end, current[2]))
    return blocks


def segments(text: str) -> list[Segment]:
    """The text's sentences, block by block (see ``_blocks``); blank lines give none."""
    out: list[Segment] = []
    for start, end, kind in _blocks(text):
        block = text[start:end]
        spans = [(0, len(block))] if kind in ("code", "table") or kind.startswith("h") else _sentence_spans(block)
        for a, b in spans:
            piece = block[a:b]
            stripped = piece.strip()
            if not stripped:
                continue
            begin = start + a + len(piece) - len(piece.lstrip())
            out.append(Segment(begin, begin + len(stripped), stripped, kind))
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


def _pair_by_position(olds: list[Segment], news: list[Segment], *, words: bool = True) -> list[Row]:
    """Rows pairing the k-th old sentence with the k-th new one (for stretches too long to search).

    Without ``words``, sentences that differ are a deletion and an insertion,
    not compared word by word (the cost of a stretch too long to search stays
    one pass over it).
    """
    rows: list[Row] = []
    for k in range(max(len(olds), len(news))):
        o = olds[k] if k < len(olds) else None
        n = news[k] if k < len(news) else None
        if o is not None and n is not None and o.key == n.key:
            rows.append(Row(op="equal", old=o, new=n))
        elif words and o is not None and n is not None and _alike(o.key, n.key):
            rows.append(_changed(o, n))
        else:
            if o is not None:
                rows.append(Row(op="delete", old=o))
            if n is not None:
                rows.append(Row(op="insert", new=n))
    return rows


def _pair(olds: list[Segment], news: list[Segment]) -> list[Row]:
    """Rows for a replaced block: each old sentence paired, in order, with the next alike new one.

    A sentence with no alike partner is a deletion (or an insertion): a
    rewritten sentence next to a removed one reads as one change and one
    removal, not as two unrelated changes.
    """
    if len(olds) * len(news) > MAX_PAIRING:
        return _pair_by_position(olds, news)
    rows: list[Row] = []
    cursor = 0
    for o in olds:
        match = next((k for k in range(cursor, len(news)) if _alike(o.key, news[k].key)), None)
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


def _anchors(old: list[str], new: list[str]) -> list[tuple[int, int]]:
    """Sentences found exactly once in each text, in an order both texts agree on.

    The longest increasing run of their positions (patience sorting) cuts the
    comparison into short stretches between them, so a few edits in a long doc
    cost little whatever its length.
    """
    return unique_anchors(old, new, 0, len(old), 0, len(new))


def _stretch_rows(olds: list[Segment], news: list[Segment]) -> list[Row]:
    """Rows for a stretch between anchors, compared sentence by sentence."""
    rows: list[Row] = []
    matcher = SequenceMatcher(None, [s.key for s in olds], [s.key for s in news])
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [Row(op="equal", old=o, new=n) for o, n in zip(olds[i1:i2], news[j1:j2], strict=True)]
        elif tag == "delete":
            rows += [Row(op="delete", old=o) for o in olds[i1:i2]]
        elif tag == "insert":
            rows += [Row(op="insert", new=n) for n in news[j1:j2]]
        else:
            rows += _pair(olds[i1:i2], news[j1:j2])
    return rows


def diff_texts(
    old_text: str, new_text: str, *, max_segments: int = MAX_SEGMENTS, context: int = CONTEXT_SEGMENTS
) -> TextDiff:
    """Compare two texts sentence by sentence; unchanged runs folded, long stretches bounded.

    Sentences that occur once in each text and in the same order anchor the
    comparison; each stretch between two anchors is compared with difflib. A
    stretch longer than ``max_segments`` on either side is not searched for
    matches: it is shown position by position (``truncated`` says so).
    """
    old_segs, new_segs = segments(old_text), segments(new_text)
    old_keys = [s.key for s in old_segs]
    new_keys = [s.key for s in new_segs]
    rows: list[Row] = []
    truncated = False
    compared = [0, 0]
    i = j = 0
    for ai, aj in [*_anchors(old_keys, new_keys), (len(old_segs), len(new_segs))]:
        olds, news = old_segs[i:ai], new_segs[j:aj]
        if olds or news:
            if len(olds) > max_segments or len(news) > max_segments:
                truncated = True
                rows += _pair_by_position(olds, news, words=False)
            else:
                compared[0] += len(olds)
                compared[1] += len(news)
                rows += _stretch_rows(olds, news)
        if ai < len(old_segs):
            rows.append(Row(op="equal", old=old_segs[ai], new=new_segs[aj]))
        i, j = ai + 1, aj + 1
    return TextDiff(
        rows=_fold(rows, context),
        old_segments=old_segs,
        new_segments=new_segs,
        truncated=truncated,
        compared=(compared[0], compared[1]),
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

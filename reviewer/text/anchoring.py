"""Anchors of findings in a doc's text, and moving them to a new revision.

Pure Python (difflib only). An anchor is a W3C TextQuoteSelector (the quote,
with about 32 characters of context either side) plus a TextPositionSelector
(character offsets). When the doc changes, :func:`reanchor` looks for the
quote in the new text:

1. exact occurrences of the quote; when there are several, the one whose
   context matches best, then the one nearest where the passage should now be;
2. otherwise fuzzy candidates near places where pieces of the quote or its
   context still occur, scored by the quote's similarity first, the context's
   next, and closeness to the expected position last.

A quote that cannot be placed with enough confidence gives ``None``: the
caller marks the finding orphaned instead of guessing.

Kept as one module: the exact and the fuzzy placement of a quote are one algorithm and
share the scoring of a candidate.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from reviewer.text.sentence_diff import text_diff

CONTEXT_CHARS = 32

# Weights of the three signals in a fuzzy match's score.
W_QUOTE = 0.6
W_CONTEXT = 0.3
W_CLOSENESS = 0.1
# Below this similarity the quote is taken to be gone (deleted or rewritten).
MIN_QUOTE_SIMILARITY = 0.75
# A fuzzy match must also score this much overall: a lookalike passage far
# away, with different context, scores about 0.65; a reworded quote in place
# scores 0.8 and more.
MIN_FUZZY_SCORE = 0.72
# Preference, when cutting a fuzzy span, for ends that match the quote's own.
EDGE_BONUS = 0.05
# A quote given without any context (nothing to confirm the place) must be
# this close to the passage.
MIN_BARE_QUOTE_SIMILARITY = 0.85
# Short quotes match by accident easily, so they also need their context.
SHORT_QUOTE_CHARS = 16
MIN_SHORT_QUOTE_CONTEXT = 0.5


@dataclass(frozen=True)
class Anchor:
    """A quote in a text, with its context and offsets (``text[start:end] == exact``)."""

    exact: str
    prefix: str
    suffix: str
    start: int
    end: int


@dataclass(frozen=True)
class Placement:
    """Where an anchor landed in a new text, and how."""

    anchor: Anchor
    method: str  # "exact" or "fuzzy"
    score: float


def anchor_at(text: str, start: int, end: int, context: int = CONTEXT_CHARS) -> Anchor:
    """The anchor of ``text[start:end]``, with ``context`` characters either side."""
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"offsets {start}..{end} are outside the text (0..{len(text)})")
    return Anchor(
        exact=text[start:end],
        prefix=text[max(0, start - context) : start],
        suffix=text[end : end + context],
        start=start,
        end=end,
    )


def locate_quote(text: str, exact: str, prefix: str = "", suffix: str = "") -> Anchor | None:
    """Find ``exact`` in ``text``; with several occurrences, the one whose context fits best."""
    if not exact:
        return None
    starts = _occurrences(text, exact)
    if not starts:
        return None
    best = max(starts, key=lambda s: (_context_similarity(text, s, s + len(exact), prefix, suffix), -s))
    return anchor_at(text, best, best + len(exact))


def locate_fuzzy(text: str, exact: str, prefix: str = "", suffix: str = "") -> Anchor | None:
    """Find a quote that is not verbatim in ``text``, e.g. copied from the rendered doc.

    A selection in the rendered page loses the Markdown markup (``**``,
    backticks, link targets); the source passage it came from is still close
    to it. There is no old position here, so only the quote's similarity and
    the context count; a quote without context must be very close.
    """
    if not exact.strip():
        return None
    probe = Anchor(exact=exact, prefix=prefix, suffix=suffix, start=0, end=len(exact))
    best: tuple[float, int, int] | None = None
    has_context = bool(prefix or suffix)
    for start, end in _candidate_spans(probe, text, 0):
        quote_sim = _ratio(exact, text[start:end])
        if quote_sim < (MIN_QUOTE_SIMILARITY if has_context else MIN_BARE_QUOTE_SIMILARITY):
            continue
        ctx = _context_similarity(text, start, end, prefix, suffix) if has_context else 0.0
        if has_context and len(exact) < SHORT_QUOTE_CHARS and ctx < MIN_SHORT_QUOTE_CONTEXT:
            continue
        score = W_QUOTE * quote_sim + W_CONTEXT * ctx
        if best is None or score > best[0]:
            best = (score, start, end)
    if best is None:
        return None
    start, end = _refine(text, probe, best[1], best[2])
    return anchor_at(text, start, end)


def expected_offset(old_text: str, new_text: str, offset: int) -> int:
    """Where character ``offset`` of ``old_text`` most likely is in ``new_text``.

    The texts are diffed sentence by sentence (:mod:`reviewer.text.sentence_diff`,
    near-linear and cached per pair of texts); an offset inside an unchanged
    sentence maps exactly, one inside a sentence edited in place keeps its
    column, and one inside any other changed region maps to the start of its
    replacement.
    """
    if not old_text or offset >= len(old_text):
        return len(new_text)
    diff = text_diff(old_text, new_text)
    segment = diff.segment_at(offset)
    column = offset - diff.old_starts[segment]
    op = diff.opcode_at(segment)
    if op is None:
        return min(offset, len(new_text))
    tag, i1, i2, j1, j2 = op
    if j1 >= len(diff.new_starts):
        return len(new_text)
    if tag == "equal":
        return diff.new_starts[j1 + segment - i1] + column
    if tag == "replace" and i2 - i1 == j2 - j1:
        # An edit within the sentence: keep the column.
        return min(diff.new_starts[j1 + segment - i1] + column, len(new_text))
    return diff.new_starts[j1]


def _quote_tags(old_text: str, new_text: str, anchor: Anchor) -> set[str]:
    """What the sentence diff did to the sentences the quote spans (``equal``, ``replace``, ``delete``)."""
    if not old_text or anchor.start >= len(old_text) or anchor.end > len(old_text):
        return set()
    diff = text_diff(old_text, new_text)
    first, last = diff.segment_at(anchor.start), diff.segment_at(max(anchor.start, anchor.end - 1))
    ops = [diff.opcode_at(k) for k in range(first, last + 1)]
    return {op[0] if op is not None else "delete" for op in ops}


def reanchor(anchor: Anchor, old_text: str, new_text: str) -> Placement | None:
    """Place ``anchor`` (made on ``old_text``) in ``new_text``, or ``None`` if it is gone.

    When the sentence diff carries the quote's sentences over unchanged, the
    quote is where the diff puts it. Otherwise an exact occurrence of the quote
    wins, the one whose context matches best (then the nearest to where the
    diff puts the passage), unless the quote's own sentence was edited in place
    and the edited passage there fits better than any occurrence elsewhere: a
    repeated phrase changed in one place keeps its finding, which does not jump
    to another copy.
    """
    if not anchor.exact:
        return None
    expected = expected_offset(old_text, new_text, anchor.start)
    tags = _quote_tags(old_text, new_text, anchor)
    n = len(anchor.exact)
    if tags == {"equal"} and old_text[anchor.start:anchor.end] == anchor.exact \
            and new_text[expected:expected + n] == anchor.exact:
        # The diff carried the quote's sentences over unchanged: this copy is the
        # quote, even when a neighbour's edit makes another copy's context look closer.
        ctx = _context_similarity(new_text, expected, expected + n, anchor.prefix, anchor.suffix)
        return Placement(anchor=anchor_at(new_text, expected, expected + n), method="exact",
                         score=W_QUOTE + W_CONTEXT * round(ctx, 3) + W_CLOSENESS)
    exact = _best_exact(anchor, new_text, expected)
    if exact is not None and exact.score >= W_QUOTE + W_CONTEXT:
        return exact  # the quote with its context as it was: nothing fits better
    if exact is not None and "replace" not in tags:
        return exact
    fuzzy = _fuzzy(anchor, new_text, expected)
    if exact is None or (fuzzy is not None and fuzzy.score > exact.score):
        return fuzzy
    return exact


def _best_exact(anchor: Anchor, text: str, expected: int) -> Placement | None:
    """The exact occurrence of the quote whose context fits best, then the nearest to ``expected``.

    Occurrences are looked at nearest first. One whose context matches fully
    ends the search (any later one is farther); the others' context is only
    compared in full when a cheap upper bound says it could beat the best so far,
    so a phrase repeated hundreds of times costs little.
    """
    n = len(anchor.exact)
    hits = _occurrences(text, anchor.exact)
    if not hits:
        return None
    # Nearest first; of two at the same distance, the earlier (as max() over the hits in order would).
    hits.sort(key=lambda s: (abs(s - expected), s))
    best: tuple[float, float] | None = None
    best_start = hits[0]
    for s in hits:
        close = _closeness(s, expected, n)
        if best is not None:
            if best[0] >= 1.0:
                break
            bound = _context_bound(text, s, s + n, anchor.prefix, anchor.suffix)
            if round(bound, 3) < best[0]:
                continue
        key = (round(_context_similarity(text, s, s + n, anchor.prefix, anchor.suffix), 3), close)
        if best is None or key > best or (key == best and s < best_start):
            best, best_start = key, s
    assert best is not None
    return Placement(
        anchor=anchor_at(text, best_start, best_start + n),
        method="exact",
        score=W_QUOTE + W_CONTEXT * best[0] + W_CLOSENESS * best[1],
    )


def _fuzzy(anchor: Anchor, text: str, expected: int) -> Placement | None:
    quote = anchor.exact
    best: tuple[float, int, int, float, float] | None = None
    for start, end in _candidate_spans(anchor, text, expected):
        quote_sim = SequenceMatcher(None, quote, text[start:end], autojunk=False).ratio()
        if quote_sim < MIN_QUOTE_SIMILARITY:
            continue
        ctx = _context_similarity(text, start, end, anchor.prefix, anchor.suffix)
        if len(quote) < SHORT_QUOTE_CHARS and ctx < MIN_SHORT_QUOTE_CONTEXT:
            continue
        score = W_QUOTE * quote_sim + W_CONTEXT * ctx + W_CLOSENESS * _closeness(start, expected, len(quote))
        if score < MIN_FUZZY_SCORE:
            continue
        if best is None or score > best[0]:
            best = (score, start, end, quote_sim, ctx)
    if best is None:
        return None
    _, start, end, _, _ = best
    start, end = _refine(text, anchor, start, end)
    quote_sim = _ratio(quote, text[start:end])
    ctx = _context_similarity(text, start, end, anchor.prefix, anchor.suffix)
    score = W_QUOTE * quote_sim + W_CONTEXT * ctx + W_CLOSENESS * _closeness(start, expected, len(quote))
    return Placement(anchor=anchor_at(text, start, end), method="fuzzy", score=max(score, best[0]))


def _refine(text: str, anchor: Anchor, start: int, end: int) -> tuple[int, int]:
    """Move a fuzzy span's ends to the nearby word boundaries that fit the quote best.

    The alignment that cut the span can run into the next sentence or stop
    short of a reworded last word. Word boundaries within a quarter of the
    quote's length are tried, scored by the quote's similarity plus a small
    bonus when the span starts and ends with the same characters as the quote
    (a sentence quoted whole stays whole even when its last word changed).
    """
    quote = anchor.exact
    slack = max(4, len(quote) // 4)

    def fit(b: int, e: int) -> float:
        shape = EDGE_BONUS * ((text[b] == quote[0]) + (text[e - 1] == quote[-1]))
        return _ratio(quote, text[b:e]) + shape

    # A quote within one paragraph stays within one: a span never grows over a blank line.
    one_paragraph = "\n\n" not in quote

    def crosses(b: int, e: int) -> bool:
        return one_paragraph and "\n\n" in text[b:e]

    if crosses(start, end):
        # Keep the paragraph that holds most of the span.
        cuts = [start] + [start + m.start() for m in re.finditer(r"\n\n", text[start:end])]
        pieces = [(max(b, start), min(e, end)) for b, e in zip(cuts, [*cuts[1:], end], strict=True)]
        start, end = _snap_to_words(text, *max(pieces, key=lambda p: p[1] - p[0]))

    def best_end(b: int, e0: int) -> int:
        ends = [e0] + [
            j for j in range(max(b + 1, e0 - slack), min(len(text), e0 + slack) + 1)
            if j == len(text) or (not text[j - 1].isspace() and text[j].isspace())
        ]
        kept = [e for e in ends if not crosses(b, e)] or ends
        return max(kept, key=lambda e: (fit(b, e), e == e0))

    def best_start(b0: int, e: int) -> int:
        starts = [b0] + [
            i for i in range(max(0, b0 - slack), min(e - 1, b0 + slack) + 1)
            if i == 0 or (text[i - 1].isspace() and not text[i].isspace())
        ]
        kept = [b for b in starts if not crosses(b, e)] or starts
        return max(kept, key=lambda b: (fit(b, e), b == b0))

    # Each end is best judged with the other one in place: end, start, end again.
    end = best_end(start, end)
    start = best_start(start, end)
    return start, best_end(start, end)


def _candidate_spans(anchor: Anchor, text: str, expected: int) -> set[tuple[int, int]]:
    """Spans of ``text`` that may hold a reworded quote.

    Seeds are places where a piece of the quote still occurs (each votes for
    where the quote would start), where the prefix ends and where the suffix
    begins, plus the expected position. Each seed's neighbourhood is aligned
    with the quote to cut a tight span.
    """
    quote = anchor.exact
    n = len(quote)
    k = max(4, min(12, n // 3))
    step = max(1, k // 2)
    votes: dict[int, int] = {}
    for i in range(0, max(1, n - k + 1), step):
        piece = quote[i : i + k]
        hits = _occurrences(text, piece, limit=20)
        for pos in hits:
            bucket = (pos - i) // max(1, n // 4)
            votes[bucket] = votes.get(bucket, 0) + 1
    seeds = {b * max(1, n // 4) for b, _ in sorted(votes.items(), key=lambda kv: -kv[1])[:12]}
    seeds.add(expected)
    if anchor.prefix:
        for pos in _occurrences(text, anchor.prefix[-k:], limit=10):
            seeds.add(pos + min(k, len(anchor.prefix)))
    if anchor.suffix:
        for pos in _occurrences(text, anchor.suffix[:k], limit=10):
            seeds.add(pos - n)
    spans: set[tuple[int, int]] = set()
    for seed in seeds:
        lo = max(0, seed - n // 2)
        hi = min(len(text), seed + n + n // 2)
        if hi <= lo:
            continue
        window = text[lo:hi]
        blocks = [b for b in SequenceMatcher(None, quote, window, autojunk=False).get_matching_blocks() if b.size]
        if not blocks:
            continue
        start = lo + blocks[0].b
        end = lo + blocks[-1].b + blocks[-1].size
        # The quote's unmatched head and tail were reworded: widen to them.
        start = max(lo, start - blocks[0].a)
        end = min(hi, end + (n - blocks[-1].a - blocks[-1].size))
        spans.add(_snap_to_words(text, start, end))
    return spans


def _snap_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """Trim whitespace off both ends of a span (never empty it)."""
    while start < end - 1 and text[start].isspace():
        start += 1
    while end > start + 1 and text[end - 1].isspace():
        end -= 1
    return start, end


def _context_similarity(text: str, start: int, end: int, prefix: str, suffix: str) -> float:
    """How well the text around ``start..end`` matches the recorded context (0..1)."""
    parts = []
    if prefix:
        parts.append((len(prefix), _ratio(prefix, text[max(0, start - len(prefix)) : start])))
    if suffix:
        parts.append((len(suffix), _ratio(suffix, text[end : end + len(suffix)])))
    if not parts:
        # The quote was the whole text: an empty neighbourhood matches.
        return 1.0 if start == 0 and end == len(text) else 0.5
    total = sum(w for w, _ in parts)
    return sum(w * r for w, r in parts) / total


def _context_bound(text: str, start: int, end: int, prefix: str, suffix: str) -> float:
    """An upper bound of :func:`_context_similarity`, from the characters alone (no alignment)."""
    parts = []
    if prefix:
        parts.append((len(prefix), _quick_ratio(prefix, text[max(0, start - len(prefix)) : start])))
    if suffix:
        parts.append((len(suffix), _quick_ratio(suffix, text[end : end + len(suffix)])))
    if not parts:
        return 1.0
    total = sum(w for w, _ in parts)
    return sum(w * r for w, r in parts) / total


def _ratio(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def _quick_ratio(a: str, b: str) -> float:
    """difflib's bound on :func:`_ratio`: the share of characters the two strings have in common."""
    if not a and not b:
        return 1.0
    common = sum((Counter(a) & Counter(b)).values())
    return 2.0 * common / (len(a) + len(b))


def _closeness(start: int, expected: int, quote_len: int) -> float:
    """1 at the expected position, falling off over a few hundred characters."""
    scale = max(200, 4 * quote_len)
    return math.exp(-abs(start - expected) / scale)


def _occurrences(text: str, needle: str, limit: int | None = None) -> list[int]:
    hits: list[int] = []
    if not needle:
        return hits
    pos = text.find(needle)
    while pos != -1:
        hits.append(pos)
        if limit is not None and len(hits) >= limit:
            break
        pos = text.find(needle, pos + 1)
    return hits


# --- the rendered doc ---------------------------------------------------------
#
# Readers select text in the rendered page, while anchors are kept on the
# Markdown source. The two texts differ by markup (``**``, link targets, list
# markers) and the whitespace between blocks; :func:`align` matches them word
# by word once per revision, and both directions of the page's work use it:
# a selection is found in the rendered text and carried to the source
# (:func:`place_selection`), and a stored anchor is carried to the rendered
# text to be highlighted (``TextMap.to_rendered``, applied by the page).

_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Selection:
    """Text a reader selected in the rendered doc, as the browser reports it.

    ``quote``, ``prefix`` and ``suffix`` are rendered text (whitespace may be
    collapsed); ``position`` is roughly where the selection starts, from 0 (the
    top of the doc) to 1 (its end), and picks among repeats that share their
    context.
    """

    quote: str
    prefix: str = ""
    suffix: str = ""
    position: float | None = None


@dataclass(frozen=True)
class TextMap:
    """Which characters of a rendered text are which characters of its source.

    ``runs`` are ``(source_start, rendered_start, length)`` stretches that are
    identical in both texts, in increasing order; characters outside every run
    (markup, block whitespace) have no counterpart.
    """

    runs: tuple[tuple[int, int, int], ...]
    rendered_length: int

    def to_rendered(self, start: int, end: int) -> tuple[int, int] | None:
        """The rendered span from the first to the last mapped character of ``source[start:end]``."""
        return self._carry(start, end, 0, 1)

    def to_source(self, start: int, end: int) -> tuple[int, int] | None:
        """The source span from the first to the last mapped character of ``rendered[start:end]``."""
        return self._carry(start, end, 1, 0)

    def _carry(self, start: int, end: int, frm: int, to: int) -> tuple[int, int] | None:
        first = last = None
        for run in self.runs:
            lo, hi = max(start, run[frm]), min(end, run[frm] + run[2])
            if lo >= hi:
                continue
            if first is None:
                first = run[to] + lo - run[frm]
            last = run[to] + hi - run[frm]
        return None if first is None or last is None else (first, last)

    def to_dict(self) -> dict[str, object]:
        """JSON-safe form, for the page that draws highlights."""
        return {"runs": [list(r) for r in self.runs], "renderedLength": self.rendered_length}


@lru_cache(maxsize=16)
def align(source: str, rendered: str) -> TextMap:
    """Match ``rendered`` (the text of the rendered doc) with its Markdown ``source``, word by word.

    Words and punctuation are compared as tokens (fast, and markup never
    splits a word); whitespace between two matched tokens joins them in one
    run when it is the same in both texts.
    """
    src = [(m.start(), m.group()) for m in _TOKEN.finditer(source)]
    ren = [(m.start(), m.group()) for m in _TOKEN.finditer(rendered)]
    matcher = SequenceMatcher(None, [t for _, t in src], [t for _, t in ren], autojunk=False)
    pairs = [(block.a + k, block.b + k) for block in matcher.get_matching_blocks() for k in range(block.size)]
    # The longest common stretch can pull a token away from its neighbour: in
    # "batch.\n4. The" against "batch.\nThe", the first "." is matched with
    # the list marker's. A token that follows its matched neighbour in the
    # rendered text is matched with the source token that follows it too, when
    # they are the same.
    for n in range(1, len(pairs)):
        (pa, pb), (a, b) = pairs[n - 1], pairs[n]
        if b == pb + 1 and a != pa + 1 and pa + 1 < a and src[pa + 1][1] == ren[b][1]:
            pairs[n] = (pa + 1, b)
    runs: list[list[int]] = []
    for ai, bi in pairs:
        s, token = src[ai]
        r = ren[bi][0]
        if runs:
            ps, pr, pn = runs[-1]
            if source[ps + pn : s] == rendered[pr + pn : r]:
                runs[-1][2] = s + len(token) - ps
                continue
        runs.append([s, r, len(token)])
    return TextMap(runs=tuple((s, r, n) for s, r, n in runs), rendered_length=len(rendered))


def _collapsed(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of whitespace as one space, and each kept character's offset."""
    out: list[str] = []
    offsets: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace():
            if out and out[-1] == " ":
                continue
            ch = " "
        out.append(ch)
        offsets.append(i)
    return "".join(out), offsets


def place_selection(source: str, rendered: str, selection: Selection) -> Anchor | None:
    """The anchor on ``source`` of a selection made in ``rendered``; None if it is not there.

    The quote is looked for in the rendered text first (where it was
    selected): among several occurrences the one whose context matches the
    selection's best, then the one nearest its position. Its span is carried to
    the source through :func:`align`. A quote that is not rendered text (typed
    or pasted into the form) is looked for in the source, verbatim and then
    approximately.
    """
    quote = " ".join(selection.quote.split())
    if not quote:
        return None
    flat, offsets = _collapsed(rendered)
    hits = _occurrences(flat, quote)
    if hits:
        prefix, suffix = _collapsed(selection.prefix)[0], _collapsed(selection.suffix)[0]
        expected = None if selection.position is None else int(selection.position * len(flat))

        def key(h: int) -> tuple[float, float]:
            ctx = _context_similarity(flat, h, h + len(quote), prefix, suffix) if prefix or suffix else 0.0
            close = 0.0 if expected is None else _closeness(h, expected, len(quote))
            return (round(ctx, 3), close)

        best = max(hits, key=key)
        span = align(source, rendered).to_source(offsets[best], offsets[best + len(quote) - 1] + 1)
        if span is not None:
            return anchor_at(source, *span)
    return locate_quote(source, selection.quote, selection.prefix, selection.suffix) or locate_fuzzy(
        source, selection.quote, selection.prefix, selection.suffix
    )

"""Re-anchoring findings' quotes when a doc is revised (pure Python, no database)."""

from __future__ import annotations

import pytest

from reviewer.text.anchoring import anchor_at, expected_offset, locate_fuzzy, locate_quote, reanchor

DOC = """# Inference serving

## Background
The chat product serves one model behind a static load balancer.
Clients send synchronous HTTP requests and wait for the answer.

## Components
A stateless API gateway authenticates and rate limits each request.
One active dispatcher per model with a hot standby holds an in-memory queue.
The queue sends each batch to the next worker in round-robin order.
Each worker runs one batch at a time, in about 1.5 seconds.

## Request flow
Responses return to the gateway and then to clients.
"""


def _anchor(text: str, quote: str, nth: int = 0):
    start = -1
    for _ in range(nth + 1):
        start = text.index(quote, start + 1)
    return anchor_at(text, start, start + len(quote))


def test_it_builds_an_anchor_with_32_characters_of_context():
    anchor = _anchor(DOC, "holds an in-memory queue")
    assert DOC[anchor.start : anchor.end] == "holds an in-memory queue"
    assert len(anchor.prefix) == 32 and len(anchor.suffix) == 32
    assert anchor.prefix.endswith("hot standby ")


def test_it_refuses_offsets_outside_the_text():
    with pytest.raises(ValueError, match="outside the text"):
        anchor_at("short", 2, 99)


def test_it_keeps_an_unchanged_passage_where_it_was():
    anchor = _anchor(DOC, "round-robin order")
    placed = reanchor(anchor, DOC, DOC)
    assert placed is not None
    assert (placed.anchor.start, placed.anchor.end, placed.method) == (anchor.start, anchor.end, "exact")


def test_it_follows_the_passage_when_text_is_inserted_before_it():
    anchor = _anchor(DOC, "One active dispatcher per model with a hot standby")
    inserted = "Latency target: p99 under 5 seconds for a 500 token prompt.\n" * 3
    new = DOC.replace("## Components\n", "## Components\n" + inserted)
    placed = reanchor(anchor, DOC, new)
    assert placed is not None
    assert placed.method == "exact"
    assert placed.anchor.start == anchor.start + len(inserted)
    assert new[placed.anchor.start : placed.anchor.end] == anchor.exact


def test_it_finds_a_slightly_reworded_quote_and_updates_the_quote():
    anchor = _anchor(DOC, "One active dispatcher per model with a hot standby holds an in-memory queue.")
    new = DOC.replace(
        "One active dispatcher per model with a hot standby holds an in-memory queue.",
        "One active dispatcher per model, with a warm standby, keeps an in-memory queue.",
    )
    placed = reanchor(anchor, DOC, new)
    assert placed is not None
    assert placed.method == "fuzzy"
    assert "warm standby" in placed.anchor.exact
    assert placed.anchor.exact.startswith("One active dispatcher")
    assert placed.anchor.exact.rstrip().endswith("in-memory queue.")
    assert new[placed.anchor.start : placed.anchor.end] == placed.anchor.exact


def test_it_picks_the_right_one_of_two_identical_quotes_by_context():
    text = (
        "Small model: each batch takes 1.5 seconds on a 2-unit worker.\n"
        "Big model: each batch takes 1.5 seconds on a 5-unit worker.\n"
    )
    anchor = _anchor(text, "each batch takes 1.5 seconds", nth=1)
    # A paragraph added at the top shifts both occurrences; the second one
    # (the big model's) must stay chosen.
    new = "Both models share the fleet.\n" + text
    placed = reanchor(anchor, text, new)
    assert placed is not None
    assert placed.anchor.start == new.index("Big model: ") + len("Big model: ")


def test_it_prefers_the_nearest_occurrence_when_contexts_tie():
    line = "the queue grows without bound\n"
    text = line * 4
    anchor = _anchor(text, "the queue grows", nth=2)
    placed = reanchor(anchor, text, text)
    assert placed is not None
    assert placed.anchor.start == anchor.start


def test_it_orphans_a_quote_whose_passage_was_deleted():
    anchor = _anchor(DOC, "The queue sends each batch to the next worker in round-robin order.")
    new = DOC.replace("The queue sends each batch to the next worker in round-robin order.\n", "")
    assert reanchor(anchor, DOC, new) is None


def test_it_orphans_a_quote_that_was_rewritten_beyond_recognition():
    anchor = _anchor(DOC, "Responses return to the gateway and then to clients.")
    new = DOC.replace(
        "Responses return to the gateway and then to clients.",
        "Each response carries a request id that the gateway maps to its open connection.",
    )
    assert reanchor(anchor, DOC, new) is None


def test_it_does_not_place_a_short_deleted_quote_on_a_lookalike_elsewhere():
    anchor = _anchor(DOC, "hot standby")
    new = DOC.replace("with a hot standby ", "")
    placed = reanchor(anchor, DOC, new)
    assert placed is None or new[placed.anchor.start : placed.anchor.end] == "hot standby"
    assert placed is None


def test_it_survives_edits_both_before_and_inside_the_quote():
    anchor = _anchor(DOC, "Each worker runs one batch at a time, in about 1.5 seconds.")
    new = ("Preface paragraph.\n\n" + DOC).replace(
        "Each worker runs one batch at a time, in about 1.5 seconds.",
        "Each worker runs one batch at a time, in roughly 1.5 seconds.",
    )
    placed = reanchor(anchor, DOC, new)
    assert placed is not None and placed.method == "fuzzy"
    assert placed.anchor.exact == "Each worker runs one batch at a time, in roughly 1.5 seconds."


def test_expected_offset_maps_unchanged_lines_through_insertions_and_deletions():
    old = "a\nb\nc\nd\n"
    new = "x\ny\na\nc\nd\n"
    assert expected_offset(old, new, old.index("c")) == new.index("c")
    assert expected_offset(old, new, old.index("b")) == new.index("c")
    assert expected_offset(old, new, len(old)) == len(new)


def test_locate_quote_uses_context_to_pick_an_occurrence():
    text = "alpha beta gamma. delta beta epsilon."
    found = locate_quote(text, "beta", prefix="delta ", suffix=" epsilon")
    assert found is not None and found.start == text.index("delta beta") + len("delta ")
    assert locate_quote(text, "zeta") is None


def test_it_does_not_move_a_deleted_quote_onto_a_similar_sentence_elsewhere():
    near = "Each worker runs one batch at a time, in about 1.5 seconds."
    lookalike = "Each worker runs one batch at a time, in about 2.5 seconds or so."
    text = f"Intro.\n\n{near}\n\n" + "Filler about gateways and clients.\n" * 20 + f"\n{lookalike}\n"
    anchor = _anchor(text, near)
    new = text.replace(near + "\n", "")
    assert reanchor(anchor, text, new) is None


def test_a_quote_whose_last_word_changed_still_covers_the_whole_sentence():
    quote = "One active dispatcher per model with a hot standby holds an in-memory queue."
    anchor = _anchor(DOC, quote)
    new = DOC.replace(quote, "One active dispatcher per model with a hot standby holds an in-memory backlog.")
    placed = reanchor(anchor, DOC, new)
    assert placed is not None
    assert placed.anchor.exact == "One active dispatcher per model with a hot standby holds an in-memory backlog."


def test_a_quote_whose_preceding_sentence_was_deleted_does_not_grow_into_its_neighbour():
    text = "First point here.\nSecond point about the queue, which grows.\nThird point.\n"
    anchor = _anchor(text, "Second point about the queue, which grows.")
    new = "Second point about the backlog, which grows.\nThird point.\n"
    placed = reanchor(anchor, text, new)
    assert placed is not None
    assert placed.anchor.exact == "Second point about the backlog, which grows."


def test_a_quote_copied_from_the_rendered_page_finds_its_markdown_source():
    source = "## Queue\n\nThe dispatcher keeps an **in-memory** queue that `grows` without bound.\n"
    found = locate_fuzzy(source, "The dispatcher keeps an in-memory queue that grows without bound.")
    assert found is not None
    assert found.exact == "The dispatcher keeps an **in-memory** queue that `grows` without bound."


def test_a_bare_quote_that_is_not_really_there_is_not_located():
    assert locate_fuzzy(DOC, "The dispatcher persists its queue to a replicated log.") is None
    assert locate_fuzzy(DOC, "   ") is None


REPEATED = "Each worker runs one batch at a time and returns it to the gateway."


def _repeating_doc(n: int = 60) -> str:
    words = ["dispatcher", "queue", "token", "latency", "host", "standby", "failover", "retry", "backlog", "peak"]

    def line(i: int) -> str:
        return f"Line {i}: " + " ".join(words[(i * k * 7 + k) % len(words)] for k in range(1, 9)) + ".\n"

    return "".join(line(i) + (REPEATED + "\n" if i % 3 == 0 else "") for i in range(n))


def test_a_repeated_phrase_changed_in_one_place_keeps_its_finding_there():
    text = _repeating_doc()
    middle = [i for i in range(len(text)) if text.startswith(REPEATED, i)][10]
    anchor = anchor_at(text, middle, middle + len(REPEATED))
    changed = REPEATED.replace("one batch", "two batch")
    new = text[:middle] + changed + text[middle + len(REPEATED):]
    placed = reanchor(anchor, text, new)
    assert placed is not None and placed.method == "fuzzy"
    assert (placed.anchor.start, placed.anchor.exact) == (middle, changed)


def test_every_other_copy_of_a_repeated_phrase_stays_on_its_own_copy():
    text = _repeating_doc()
    starts = [i for i in range(len(text)) if text.startswith(REPEATED, i)]
    # The line before the sixth copy is rewritten: its context changes, the copy does not move.
    before = text.rindex("Line ", 0, starts[5])
    line_end = text.index("\n", before) + 1
    new = text[:before] + "A line rewritten from start to end about failover.\n" + text[line_end:]
    shift = len(new) - len(text)
    for k, start in enumerate(starts):
        placed = reanchor(anchor_at(text, start, start + len(REPEATED)), text, new)
        assert placed is not None and placed.method == "exact"
        assert placed.anchor.start == start + (shift if start > before else 0), k


def test_a_reworded_quote_does_not_grow_over_a_blank_line():
    quote = "S844: Request latency timeout round average request timeout average client queue."
    text = f"Intro line.\n{quote}\n\nS845: Average dispatcher share request latency.\n"
    anchor = _anchor(text, quote)
    new = text.replace("queue.", "backlog.")
    placed = reanchor(anchor, text, new)
    assert placed is not None
    assert placed.anchor.exact == quote.replace("queue.", "backlog.")

"""Placing a reader's selection: found in the rendered doc, carried to the Markdown source."""

from __future__ import annotations

from reviewer.text.anchoring import Selection, align, place_selection
from reviewer.text.markdown import rendered_text

SOURCE = """# Request flow

1. The gateway sends the request on to the queue.
2. The dispatcher reads requests from the queue and closes a batch.
3. The dispatcher sends the closed batch to the queue in the GPU workers.

A **small** model and a [big](https://example.com/big) model share the hosts.
"""
RENDERED = rendered_text(SOURCE)
QUOTE = "to the queue"


def _around(text: str, start: int, end: int) -> Selection:
    """A selection as the page reports it: quote, 32 characters either side, position."""
    return Selection(quote=text[start:end], prefix=text[max(0, start - 32):start], suffix=text[end:end + 32],
                     position=start / len(text))


def test_it_maps_every_word_of_the_rendered_text_to_the_source() -> None:
    m = align(SOURCE, RENDERED)
    start = RENDERED.index("closes a batch")
    assert m.to_source(start, start + len("closes a batch")) == (
        SOURCE.index("closes a batch"), SOURCE.index("closes a batch") + len("closes a batch"))
    s = SOURCE.index("closes a batch")
    assert m.to_rendered(s, s + 6) == (start, start + 6)


def test_it_places_the_second_of_two_identical_quotes_by_its_context() -> None:
    second = RENDERED.index(QUOTE, RENDERED.index(QUOTE) + 1)
    anchor = place_selection(SOURCE, RENDERED, _around(RENDERED, second, second + len(QUOTE)))
    assert anchor is not None and anchor.exact == QUOTE
    assert anchor.start == SOURCE.index(QUOTE, SOURCE.index(QUOTE) + 1)
    assert anchor.prefix.endswith("sends the closed batch ")


def test_it_places_the_first_of_two_identical_quotes_by_its_context() -> None:
    first = RENDERED.index(QUOTE)
    anchor = place_selection(SOURCE, RENDERED, _around(RENDERED, first, first + len(QUOTE)))
    assert anchor is not None and anchor.start == SOURCE.index(QUOTE)


def test_it_uses_the_position_when_the_context_says_nothing() -> None:
    second = RENDERED.index(QUOTE, RENDERED.index(QUOTE) + 1)
    near_second = place_selection(SOURCE, RENDERED, Selection(quote=QUOTE, position=second / len(RENDERED)))
    near_first = place_selection(SOURCE, RENDERED, Selection(quote=QUOTE, position=0.0))
    assert near_second is not None and near_first is not None
    assert near_second.start == SOURCE.index(QUOTE, SOURCE.index(QUOTE) + 1)
    assert near_first.start == SOURCE.index(QUOTE)


def test_it_carries_a_selection_across_bold_and_a_link_to_the_source_passage() -> None:
    quote = "small model and a big model"
    start = RENDERED.index(quote)
    anchor = place_selection(SOURCE, RENDERED, _around(RENDERED, start, start + len(quote)))
    assert anchor is not None
    assert anchor.exact == "small** model and a [big](https://example.com/big) model"


def test_it_finds_a_quote_typed_from_the_source_that_is_not_rendered_text() -> None:
    anchor = place_selection(SOURCE, RENDERED, Selection(quote="**small** model"))
    assert anchor is not None and anchor.exact == "**small** model"


def test_it_gives_none_for_a_quote_that_is_not_in_the_doc() -> None:
    assert place_selection(SOURCE, RENDERED, Selection(quote="the standby replicates the queue")) is None
    assert place_selection(SOURCE, RENDERED, Selection(quote="   ")) is None


def test_it_ends_a_list_item_selection_at_its_own_full_stop_not_the_next_items_number() -> None:
    quote = "The dispatcher reads requests from the queue and closes a batch."
    start = RENDERED.index(quote)
    anchor = place_selection(SOURCE, RENDERED, _around(RENDERED, start, start + len(quote)))
    assert anchor is not None and anchor.exact == quote


def test_offsets_after_astral_characters_are_code_points_of_the_source():

    source = "Astral check 😀😀 **the gateway** answers from its cache. The 𝔘nit 𝔘 says the standby takes over.\n"
    rendered = rendered_text(source)
    for quote in ("the gateway answers from its cache", "the standby takes over"):
        anchor = place_selection(source, rendered, Selection(quote=quote))
        assert anchor is not None
        assert source[anchor.start:anchor.end].replace("**", "") == quote
        # The page's map carries the same code point offsets into the rendered text.
        span = align(source, rendered).to_rendered(anchor.start, anchor.end)
        assert span is not None and rendered[span[0]:span[1]] == quote

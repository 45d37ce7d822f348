"""The anchored sentence diff: exact opcodes, near-linear on repeated lines."""

from __future__ import annotations

from difflib import SequenceMatcher

from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.text.sentence_diff import opcodes, segments, text_diff


def _apply(old: list[str], new: list[str], codes: list) -> list[str]:
    out: list[str] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal":
            assert old[i1:i2] == new[j1:j2]
            out += old[i1:i2]
        else:
            out += new[j1:j2]
    return out


def test_segments_cover_the_text_by_line_and_sentence():
    text = "One. Two!  Three\nFour?\n\nfive"
    assert segments(text) == ["One. ", "Two!  ", "Three\n", "Four?\n", "\n", "five"]
    assert "".join(segments(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=80), st.lists(st.sampled_from("abcdef"), max_size=80))
def test_opcodes_turn_the_old_list_into_the_new_one(old: list[str], new: list[str]) -> None:
    codes = opcodes(old, new)
    assert _apply(old, new, codes) == new
    assert codes == [] or (codes[0][1], codes[0][3]) == (0, 0)
    assert all(a[2] == b[1] and a[4] == b[3] for a, b in zip(codes, codes[1:], strict=False))


def test_small_lists_match_difflib():
    old = list("abxcdefy")
    new = list("abcdzefy")
    assert opcodes(old, new) == SequenceMatcher(None, old, new, autojunk=False).get_opcodes()


def test_a_long_doc_of_repeated_lines_keeps_every_unchanged_line_equal():
    lines = [f"Line {i}.\n" if i % 2 else "Each worker runs one batch.\n" for i in range(4000)]
    new = lines[:2001] + ["Each worker runs two batches.\n"] + lines[2002:]
    diff = text_diff("".join(lines), "".join(new))
    changed = [op for op in diff.opcodes if op[0] != "equal"]
    assert changed == [("replace", 2001, 2002, 2001, 2002)]

"""The revision diff: two revisions of a session's doc, sentence by sentence, with the
findings placed on each side; "changes since my last review"; size caps; access."""

from __future__ import annotations

from typing import Any

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.models import Finding
from reviewer.review import services
from reviewer.text.diffing import diff_texts, segments

pytestmark = pytest.mark.django_db

OLD_SENTENCE = "Each worker runs one batch at a time, in about 1.5 seconds."
NEW_SENTENCE = "Each worker runs one batch at a time, in about 2 seconds."


@pytest.fixture
def revised(open_review: Any, people: dict[str, Any]) -> dict[str, Any]:
    """Revision 1 with three findings, then revision 2 changing one sentence and deleting another."""
    make = services.finding_create
    worker = make(session=open_review, author=people["reviewer"], review_pass="numbers", severity="fix_now",
                  title="Batch time", anchor_exact="Each worker runs one batch at a time")
    standby = make(session=open_review, author=people["owner"], review_pass="break", severity="clarify",
                   title="Hot standby holds nothing", anchor_exact="hot standby")
    rr = make(session=open_review, author=people["reviewer"], review_pass="trace", severity="fix_now",
              title="Round-robin", anchor_exact="The queue sends each batch to the next worker in round-robin order.")
    body = open_review.doc.body.replace(OLD_SENTENCE, NEW_SENTENCE).replace(
        "The queue sends each batch to the next worker in round-robin order.\n", "")
    services.doc_revise(doc=open_review.doc, author=people["owner"], body=body)
    return {"session": open_review, "worker": worker, "standby": standby, "rr": rr}


def _rows_with(data: dict[str, Any], side: str, text: str) -> list[dict[str, Any]]:
    return [r for r in data["rows"] if r.get(side) and text in r[side]["text"]]


def test_the_diff_of_revisions_1_and_2_shows_the_changed_sentence_and_the_findings_on_each_side(api_as, revised):
    session = revised["session"]
    answer = api_as("reviewer").get(f"/api/sessions/{session.pk}/diff/?from=1&to=2")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert (data["from"]["number"], data["to"]["number"], data["from_chosen"]) == (1, 2, "given")
    assert data["url"] == f"/sessions/{session.pk}/diff/?from=1&to=2"
    [changed] = _rows_with(data, "old", OLD_SENTENCE)
    assert changed["op"] == "replace" and changed["new"]["text"] == NEW_SENTENCE
    # The changed words are marked on each side: "1.5" became "2".
    old_changes = [OLD_SENTENCE[s - changed["old"]["start"]:e - changed["old"]["start"]]
                   for s, e in changed["old"]["changes"]]
    new_changes = [NEW_SENTENCE[s - changed["new"]["start"]:e - changed["new"]["start"]]
                   for s, e in changed["new"]["changes"]]
    assert old_changes == ["1.5"] and new_changes == ["2"]
    worker = revised["worker"]
    assert worker.pk in changed["old"]["findings"] and worker.pk in changed["new"]["findings"]
    placed = {f["id"]: f for f in data["findings"]}
    # The finding moved to revision 2 with the doc: anchored there, found again on revision 1.
    assert placed[worker.pk]["old"]["how"] == "re-anchored" and placed[worker.pk]["new"]["how"] == "anchored"
    assert placed[worker.pk]["revision"] == 2
    # The deleted sentence: its finding is on revision 1 only.
    [deleted] = _rows_with(data, "old", "round-robin order")
    assert deleted["op"] == "delete" and deleted["new"] is None
    rr = revised["rr"]
    assert rr.pk in deleted["old"]["findings"]
    assert placed[rr.pk]["old"]["how"] == "anchored" and placed[rr.pk]["new"] is None
    assert placed[revised["standby"].pk]["old"] is not None and placed[revised["standby"].pk]["new"] is not None
    assert data["stats"] == {"deleted": 1, "inserted": 0, "replaced": 1}


def test_the_diff_page_shows_both_sides_and_the_findings(client, people, revised):
    session = revised["session"]
    client.force_login(people["reviewer"])
    page = client.get(f"/sessions/{session.pk}/diff/?from=1&to=2")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<span class="changed">1.5</span>' in html and '<span class="changed">2</span>' in html
    assert f'data-finding-ids="{revised["worker"].pk}"' in html
    assert "re-anchored" in html and "anchored" in html
    inline = client.get(f"/sessions/{session.pk}/diff/?from=1&to=2&view=inline").content.decode()
    assert 'class="old replace"' in inline and 'class="new replace"' in inline


def test_changes_since_my_last_review_start_at_the_revision_i_last_filed_on(api_as, people, revised):
    session = revised["session"]
    # The reviewer filed on revision 1; the owner replies after revision 2; then revision 3.
    services.reply_create(finding=revised["standby"], author=people["owner"], body="Agreed.")
    services.doc_revise(doc=session.doc, author=people["owner"], body=session.doc.body + "\nA closing line.\n")
    reviewer = api_as("reviewer").get(f"/api/sessions/{session.pk}/diff/").json()
    assert (reviewer["from"]["number"], reviewer["to"]["number"], reviewer["from_chosen"]) == (1, 3, "last_review")
    owner = api_as("owner").get(f"/api/sessions/{session.pk}/diff/").json()
    assert (owner["from"]["number"], owner["to"]["number"]) == (2, 3)
    assert _rows_with(owner, "new", "A closing line.")[0]["op"] == "insert"


def test_someone_who_filed_nothing_compares_from_when_the_review_opened(api_as, people, revised):
    session = revised["session"]
    session.reviewers.add(people["staff"])
    data = api_as("staff").get(f"/api/sessions/{session.pk}/diff/").json()
    assert (data["from"]["number"], data["to"]["number"]) == (1, 2)


@pytest.mark.parametrize("query, field", [("from=9&to=2", "from"), ("from=1&to=x", "to"), ("from=&to=0", "to")])
def test_a_revision_that_does_not_exist_is_named(api_as, revised, query, field):
    answer = api_as("owner").get(f"/api/sessions/{revised['session'].pk}/diff/?{query}")
    assert answer.status_code == 400
    assert field in answer.json() and "revision" in answer.json()[field][0]


def test_outsiders_get_404_on_the_diff_api_and_page(api_as, client, people, revised):
    session = revised["session"]
    assert api_as("outsider").get(f"/api/sessions/{session.pk}/diff/?from=1&to=2").status_code == 404
    client.force_login(people["outsider"])
    assert client.get(f"/sessions/{session.pk}/diff/?from=1&to=2").status_code == 404
    client.logout()
    assert client.get(f"/sessions/{session.pk}/diff/").status_code == 302  # to the sign-in page


def test_a_long_diff_is_capped_and_says_so(api_as, people, revised, settings):
    session = revised["session"]
    settings.DIFF_MAX_SEGMENTS = 5
    body = "\n".join(f"Sentence number {i} changed." for i in range(40))
    services.doc_revise(doc=session.doc, author=people["owner"], body=body)
    data = api_as("owner").get(f"/api/sessions/{session.pk}/diff/?from=2&to=3").json()
    assert data["truncated"] is True
    assert any("DIFF_MAX_SEGMENTS" in n for n in data["notices"])
    # Nothing is left out: every sentence of the rewritten stretch is shown, unsearched.
    assert data["stats"]["inserted"] == 40 and data["stats"]["replaced"] == 0


def test_scattered_edits_in_a_long_doc_are_all_found_within_the_cap():
    old = "\n".join(f"Sentence {i} of the doc." for i in range(20_000))
    new = old.replace("Sentence 10 of", "Sentence ten of").replace("Sentence 19990 of", "Sentence last of")
    diff = diff_texts(old, new, max_segments=50)
    assert not diff.truncated
    assert [r.new.text for r in diff.rows if r.op == "replace"] == ["Sentence ten of the doc.",
                                                                     "Sentence last of the doc."]


def test_unchanged_runs_are_folded_around_the_changes():
    old = "\n".join(f"Line {i}." for i in range(50))
    new = old.replace("Line 25.", "Line twenty-five.")
    diff = diff_texts(old, new, context=2)
    ops = [r.op for r in diff.rows]
    assert ops == ["skip", "equal", "equal", "replace", "equal", "equal", "skip"]
    assert diff.rows[0].skipped == 23 and diff.rows[-1].skipped == 22
    assert all(old[s.start:s.end] == s.text for s in segments(old))


def test_merged_findings_are_not_placed(api_as, people, revised):
    session = revised["session"]
    Finding.objects.filter(pk=revised["rr"].pk).update(merged_into=revised["worker"])
    data = api_as("owner").get(f"/api/sessions/{session.pk}/diff/?from=1&to=2").json()
    assert revised["rr"].pk not in {f["id"] for f in data["findings"]}


def test_numbered_list_items_keep_their_number():
    texts = [s.text for s in segments("1. The gateway authenticates the caller. Then it forwards.\n")]
    assert texts == ["1. The gateway authenticates the caller.", "Then it forwards."]


def test_segments_are_exact_slices_of_any_text():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.text(alphabet=st.sampled_from(list("ab1. !?\n\r\t-)")), max_size=80))
    def check(text: str) -> None:
        found = segments(text)
        assert all(text[s.start:s.end] == s.text and s.text == s.text.strip() and s.text for s in found)
        assert [s.start for s in found] == sorted(s.start for s in found)
        # Every non-blank character is inside some segment.
        covered = {i for s in found for i in range(s.start, s.end)}
        assert all(i in covered for i, c in enumerate(text) if not c.isspace())

    check()


def test_the_diff_places_published_findings_and_the_viewers_own_drafts_only(api_as, people, revised):
    session = revised["session"]
    session.file_directly = False
    session.save(update_fields=["file_directly"])
    draft = services.finding_create(session=session, author=people["reviewer"], review_pass="trace",
                                    title="A draft on the changed sentence", anchor_exact="in about 2 seconds")
    url = f"/api/sessions/{session.pk}/diff/?from=1&to=2"
    seen_by_owner = {f["id"] for f in api_as("owner").get(url).json()["findings"]}
    seen_by_writer = {f["id"] for f in api_as("reviewer").get(url).json()["findings"]}
    assert draft.pk not in seen_by_owner and revised["worker"].pk in seen_by_owner
    assert draft.pk in seen_by_writer


def test_segments_follow_the_markdown_not_the_source_lines():
    text = ("## Part 2\n\nThe gateway authenticates\nthe caller. It forwards\nthe request.\n\n"
            "- one item that wraps\n  onto a second line\n- two\n\n```\nx = 1. y = 2\n```\n")
    found = [(s.kind, s.key) for s in segments(text)]
    assert found == [("h2", "## Part 2"), ("p", "The gateway authenticates the caller."),
                     ("p", "It forwards the request."), ("li", "- one item that wraps onto a second line"),
                     ("li", "- two"), ("code", "```"), ("code", "x = 1. y = 2"), ("code", "```")]
    # Re-wrapping a paragraph changes no sentence.
    rewrapped = text.replace("authenticates\nthe caller", "authenticates the\ncaller")
    assert {r.op for r in diff_texts(text, rewrapped).rows} <= {"equal", "skip"}

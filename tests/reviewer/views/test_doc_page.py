"""The doc's own pages: read a revision, add one by pasting or uploading, see the
revisions and the diff of any two, rendered as Markdown and compared by sentence."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from reviewer.models import DocRevision
from reviewer.review import services

pytestmark = pytest.mark.django_db

BODY = "# Serving doc\n\n## Part 1\n\nThe gateway authenticates\nthe caller. It forwards the request.\n"


@pytest.fixture
def doc(django_user_model: Any) -> Any:
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    reviewer = django_user_model.objects.create_user("reviewer", password="pw-reviewer-123")
    made = services.doc_create(owner=owner, title="Serving doc", body=BODY)
    services.session_create(owner=owner, doc=made, title="Serving review", reviewers=[reviewer])
    return made


def as_user(doc: Any, name: str) -> Client:
    client = Client()
    client.force_login(doc.owner if name == "owner" else doc.sessions.get().reviewers.get(username=name))
    return client


def test_it_shows_the_latest_revision_rendered_with_the_revisions_and_reviews(doc) -> None:
    page = as_user(doc, "reviewer").get(f"/docs/{doc.pk}/").content.decode()
    assert "<h2>Part 1</h2>" in page and "## Part 1" not in page
    assert 'data-revision="1"' in page and "Serving review" in page
    assert 'id="doc-revise-form"' not in page  # a reviewer reads; the owner revises


def test_the_owner_pastes_a_revision_and_the_page_links_its_diff(doc) -> None:
    client = as_user(doc, "owner")
    new = BODY.replace("It forwards the request.", "It forwards the request to a dispatcher.")
    response = client.post(f"/docs/{doc.pk}/", {"title": "Serving doc", "body": new, "base_revision": "1"})
    assert response.status_code == 302
    assert DocRevision.objects.filter(doc=doc).count() == 2
    page = client.get(f"/docs/{doc.pk}/").content.decode()
    assert "Saved revision 2." in page and f'/docs/{doc.pk}/diff/?from=1&amp;to=2' in page
    old = client.get(f"/docs/{doc.pk}/?revision=1").content.decode()
    assert "Revision 1" in old and "to a dispatcher" not in old


def test_the_owner_uploads_a_revision_and_bad_files_are_refused_with_the_fix(doc) -> None:
    client = as_user(doc, "owner")
    upload = SimpleUploadedFile("doc.md", (BODY + "\nA new paragraph.\n").encode(), content_type="text/markdown")
    assert client.post(f"/docs/{doc.pk}/", {"file": upload, "base_revision": "1"}).status_code == 302
    assert "A new paragraph." in doc.latest_revision().body
    binary = SimpleUploadedFile("doc.pdf", b"%PDF-1.4", content_type="application/pdf")
    refused = client.post(f"/docs/{doc.pk}/", {"file": binary, "base_revision": "2"})
    assert refused.status_code == 400 and "upload a .md or .txt file" in refused.content.decode()


def test_a_stale_revision_is_refused_and_the_pasted_text_kept(doc) -> None:
    client = as_user(doc, "owner")
    services.doc_revise(doc=doc, author=doc.owner, body=BODY + "\nMeanwhile.\n")
    response = client.post(f"/docs/{doc.pk}/", {"body": "My careful edit.", "base_revision": "1"})
    assert response.status_code == 409
    page = response.content.decode()
    assert "newer revision" in page and "My careful edit." in page
    assert DocRevision.objects.filter(doc=doc).count() == 2


def test_a_reviewer_cannot_post_a_revision(doc) -> None:
    response = as_user(doc, "reviewer").post(f"/docs/{doc.pk}/", {"body": "Mine now.", "base_revision": "1"})
    assert response.status_code == 403 and DocRevision.objects.filter(doc=doc).count() == 1


def test_the_diff_renders_markdown_and_compares_by_sentence(doc) -> None:
    new = BODY.replace("## Part 1", "## Part one").replace(
        "The gateway authenticates\nthe caller.", "The gateway authenticates the\ncaller.")
    services.doc_revise(doc=doc, author=doc.owner, body=new)
    page = as_user(doc, "reviewer").get(f"/docs/{doc.pk}/diff/?from=1&to=2").content.decode()
    assert "##" not in page
    assert 'class="text md-h2"' in page
    # The re-wrapped sentence is unchanged: only the heading is.
    assert "1 changed, 0 added, 0 removed sentences" in page


def test_docs_are_links_from_home_and_the_session(doc) -> None:
    client = as_user(doc, "owner")
    assert f'href="/docs/{doc.pk}/"' in client.get("/").content.decode()
    session = doc.sessions.get()
    assert f'href="/docs/{doc.pk}/" id="doc-link"' in client.get(f"/sessions/{session.pk}/").content.decode()


def test_someone_outside_the_doc_gets_404(doc, django_user_model) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("outsider", password="pw-out-123"))
    assert client.get(f"/docs/{doc.pk}/").status_code == 404
    assert client.get(f"/docs/{doc.pk}/diff/").status_code == 404

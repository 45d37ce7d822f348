"""Markdown is rendered sanitized: no scripts, event handlers or javascript: links."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from review_data_fixtures import *  # noqa: F403

from reviewer.text.markdown import render_markdown

XSS_PAYLOADS = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=http://evil.example/xss.js></SCRIPT>",
    '<img src=x onerror="alert(1)">',
    "<img src=x onerror=alert(1)//",
    '<svg onload="alert(1)"><circle r="5"/></svg>',
    "<svg><script>alert(1)</script></svg>",
    '<a href="javascript:alert(1)">click</a>',
    '<a href="JaVaScRiPt:alert(1)">click</a>',
    '<a href="&#106;avascript:alert(1)">click</a>',
    '<a href="java\tscript:alert(1)">click</a>',
    "[click](javascript:alert(1))",
    "[click](JAVASCRIPT:alert(1))",
    "[click](vbscript:msgbox(1))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![img](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    '<iframe src="https://evil.example"></iframe>',
    '<object data="javascript:alert(1)"></object>',
    '<embed src="javascript:alert(1)">',
    '<body onload="alert(1)">',
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<p onclick="alert(1)" onmouseover="alert(2)">hover</p>',
    '<details open ontoggle="alert(1)">',
    '<form action="javascript:alert(1)"><button>go</button></form>',
    '<input autofocus onfocus="alert(1)">',
    '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    '<link rel="stylesheet" href="javascript:alert(1)">',
    '<base href="javascript:alert(1)//">',
    '<style>@import "javascript:alert(1)";</style>',
    '"><script>alert(1)</script>',
    "<<script>script>alert(1)<</script>/script>",
    '<a href="https://ok.example" onclick="alert(1)">ok</a>',
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
    '<template><img src=x onerror=alert(1)></template>',
    "`<script>` inside code is fine",
    "<!--<script>alert(1)</script>-->",
]

ALLOWED_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4",
                "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "strong", "sub", "sup", "table",
                "tbody", "td", "th", "thead", "tr", "ul"}
SAFE_SCHEMES = ("http:", "https:", "mailto:")


class _Audit(HTMLParser):
    """Collects what a browser would act on: tags, attributes and URLs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name in {"style", "src", "srcdoc", "formaction", "action"}:
                self.problems.append(f"attribute {name}")
            if name == "href" and value is not None:
                # As a browser reads it: tabs and newlines dropped, ends trimmed.
                url = re.sub(r"[\t\n\r]", "", value).strip(" \x00\x0b\x0c").lower()
                scheme = re.match(r"[a-z][a-z0-9+.-]*:", url)
                if scheme and not url.startswith(SAFE_SCHEMES):
                    self.problems.append(f"href {value}")


def _problems(html: str) -> list[str]:
    audit = _Audit()
    audit.feed(html)
    audit.close()
    return audit.problems


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_it_neutralises_xss_payloads(payload):
    html = render_markdown(payload)
    assert _problems(html) == [], (payload, html)
    assert "<script" not in html.lower()


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_it_neutralises_xss_inside_ordinary_markdown(payload):
    html = render_markdown(f"# Title\n\nSome *text* and {payload} and more.\n\n- item {payload}\n")
    assert _problems(html) == [], (payload, html)
    assert "<script" not in html.lower()


def test_the_audit_itself_catches_unsafe_html():
    assert _problems('<img src=x onerror="a()"><a href="javascript:x">y</a>') == [
        "tag <img>", "attribute src", "attribute onerror", "href javascript:x"]


def test_it_keeps_ordinary_markdown():
    html = render_markdown(
        "## Queue\n\nThe **queue** grows by *800* per second. See [the doc](https://example.com/doc).\n\n"
        "```\nqps = 1000\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\n1. one\n2. two\n"
    )
    assert "<h2>Queue</h2>" in html
    assert "<strong>queue</strong>" in html and "<em>800</em>" in html
    assert '<a href="https://example.com/doc" rel="noopener noreferrer nofollow">the doc</a>' in html
    assert "<pre><code>qps = 1000\n</code></pre>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert "<blockquote>" in html and "<ol>" in html


def test_code_spans_show_markup_as_text():
    assert render_markdown("`<script>`") == "<p><code>&lt;script&gt;</code></p>"


@pytest.mark.django_db
def test_the_api_serves_only_sanitized_html(api_as, open_review):
    response = api_as("reviewer").post(
        f"/api/sessions/{open_review.pk}/findings/",
        {"pass": "break", "title": "t", "body": '<img src=x onerror=alert(1)> [x](javascript:alert(1))'},
        format="json",
    )
    html = response.json()["body_html"].lower()
    assert "onerror" not in html and "javascript:" not in html and "<img" not in html
    # The Markdown source is kept as written: it is the reviewer's text.
    assert response.json()["body"].startswith("<img src=x")

"""Markdown rendered to HTML that is safe to put in a page.

Markdown allows raw HTML, so the rendered output is cleaned by nh3 (an HTML
sanitizer built on html5ever) with an allow-list: no scripts, no event
handler attributes, no style, and links only to http, https and mailto.
"""

from __future__ import annotations

from functools import lru_cache
from html.parser import HTMLParser

import markdown as md
import nh3

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "li", "ol", "p", "pre", "strong", "sub", "sup", "table", "tbody", "td",
    "th", "thead", "tr", "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "code": {"class"},
    "td": {"align"},
    "th": {"align"},
}
URL_SCHEMES = {"http", "https", "mailto"}
EXTENSIONS = ["fenced_code", "tables", "sane_lists"]


def render_markdown(text: str) -> str:
    """Markdown ``text`` as sanitized HTML."""
    html = md.markdown(text or "", extensions=EXTENSIONS, output_format="html")
    return sanitize_html(html)


def sanitize_html(html: str) -> str:
    """Keep only allow-listed tags, attributes and link schemes."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@lru_cache(maxsize=16)
def rendered_text(text: str) -> str:
    """The text of Markdown ``text`` as rendered: what a browser's text nodes hold, in order.

    Anchors are placed and highlighted through this text (see
    ``reviewer.text.anchoring.align``); the page inserts the rendered HTML with
    nothing around it, so its text is exactly this.
    """
    parser = _TextOf()
    parser.feed(render_markdown(text))
    parser.close()
    return "".join(parser.parts)

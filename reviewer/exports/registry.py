"""The export formats of a review session, one module each, and the one list of them.

The API serves each at ``/api/sessions/<id>/export.<suffix>`` through one view with a
renderer per format, and the session page offers a download link for each, both read
from ``FORMATS``. A new format is a module with a ``render(session, url)`` that returns
the export's text, and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reviewer.exports import csv_export, json_export, markdown_report, web_annotations
from reviewer.exports.contents import UrlBuilder
from reviewer.models.review import ReviewSession


@dataclass(frozen=True)
class ExportFormat:
    """One export format: its file suffix, its media type and what renders it."""

    suffix: str  # the URL's and the file name's ending: export.<suffix>
    media_type: str
    charset: str | None  # None for the JSON types, which are UTF-8 by definition
    #: The export's text for a session; ``url`` makes an absolute URL of a path.
    render: Callable[[ReviewSession, UrlBuilder], str]
    description: str
    json: bool = False  # the body is a JSON document (for the API schema)


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("md", "text/markdown", "utf-8", markdown_report.render,
                 "The review report in Markdown: restatement, numbers headline, then the buckets."),
    ExportFormat("json", "application/json", None, json_export.render,
                 "The session's findings, with replies, as JSON.", json=True),
    ExportFormat("csv", "text/csv", "utf-8", csv_export.render,
                 "The session's findings as CSV, one row per finding."),
    ExportFormat("jsonld", "application/ld+json", None, web_annotations.render,
                 'The findings as W3C Web Annotations (one per finding, motivation "assessing").',
                 json=True),
)

BY_SUFFIX = {f.suffix: f for f in FORMATS}

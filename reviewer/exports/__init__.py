"""A review session's findings exported: the Markdown report, JSON, CSV and W3C Web
Annotations."""

"""A review session's findings exported: JSON, CSV, the Markdown report and W3C Web
Annotations."""

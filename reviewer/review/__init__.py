"""Review work: docs and their revisions, sessions, findings and replies, merging and
near-duplicates, publishing, notifications, the review document, the revision diff,
a finding's evidence, and the example reviews that ship with the product."""

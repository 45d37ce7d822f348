"""Near-duplicate findings of a session: flagged in lists and exports, merged on request.

Two findings of one session are near-duplicates when they are in the same
pass and either quote the same passage of the doc, or carry the same title
and text (one suggestion of the numbers pass adopted twice, by two people or
by two clicks). Text is compared with white space collapsed and case folded.
A finding already merged into another is no longer anyone's duplicate.

Nothing here writes; merging is :func:`reviewer.review.merge.finding_merge`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from reviewer.models.review import Finding, ReviewSession

_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def duplicate_keys(review_pass: str, anchor_exact: str, title: str, body: str) -> list[tuple[str, ...]]:
    """The keys under which a finding meets its near-duplicates."""
    keys: list[tuple[str, ...]] = []
    quote = _norm(anchor_exact)
    if quote:
        keys.append(("quote", review_pass, quote))
    if _norm(title):
        keys.append(("text", review_pass, _norm(title), _norm(body)))
    return keys


def duplicate_map(rows: Iterable[tuple[int, str, str, str, str]]) -> dict[int, list[int]]:
    """``{id: [ids of its near-duplicates]}`` from ``(id, pass, quote, title, body)`` rows.

    Findings without a duplicate are left out.
    """
    groups: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for pk, review_pass, quote, title, body in rows:
        for key in duplicate_keys(review_pass, quote, title, body):
            groups[key].add(pk)
    found: dict[int, set[int]] = defaultdict(set)
    for ids in groups.values():
        if len(ids) > 1:
            for pk in ids:
                found[pk] |= ids - {pk}
    return {pk: sorted(others) for pk, others in found.items()}


def duplicates_in_session(session_id: int) -> dict[int, list[int]]:
    """Near-duplicates among the session's findings not merged, in one query."""
    # Only published findings: a draft is its writer's alone, and flagging it would tell others it exists.
    rows = Finding.objects.filter(session_id=session_id, merged_into__isnull=True,
                                  published_at__isnull=False).values_list(
        "pk", "review_pass", "anchor_exact", "title", "body"
    )
    return duplicate_map(rows)


def duplicates_of(finding: Finding) -> list[int]:
    """Ids of ``finding``'s near-duplicates (what ``duplicates_in_session`` gives it), for
    one finding: only findings of its pass are read, and only its keys are compared."""
    if finding.published_at is None or finding.merged_into_id is not None:
        return []
    keys = set(duplicate_keys(finding.review_pass, finding.anchor_exact, finding.title, finding.body))
    if not keys:
        return []
    rows = (
        Finding.objects.filter(session_id=finding.session_id, review_pass=finding.review_pass,
                               merged_into__isnull=True, published_at__isnull=False)
        .exclude(pk=finding.pk)
        .values_list("pk", "review_pass", "anchor_exact", "title", "body")
    )
    return sorted(pk for pk, review_pass, quote, title, body in rows
                  if keys.intersection(duplicate_keys(review_pass, quote, title, body)))


def duplicate_groups(session: ReviewSession) -> list[list[int]]:
    """The session's near-duplicates as groups of ids (each group sorted, groups by first id)."""
    found = duplicates_in_session(session.pk)
    seen: set[int] = set()
    groups: list[list[int]] = []
    for pk in sorted(found):
        if pk in seen:
            continue
        # Connected through any shared key: collect the whole component.
        group, todo = set(), [pk]
        while todo:
            current = todo.pop()
            if current in group:
                continue
            group.add(current)
            todo.extend(found.get(current, []))
        seen |= group
        groups.append(sorted(group))
    return groups

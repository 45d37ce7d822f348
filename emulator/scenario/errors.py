"""The one error type of the scenario format: a mistake a user can fix."""

from __future__ import annotations


class ScenarioError(ValueError):
    """A mistake in a scenario a user can fix.

    ``path`` is the key path (``hosts[2].workers[1]``), ``fix`` a hint (may be None);
    ``str(e)`` is one line: ``path: problem`` followed by the hint when there is one.
    """

    def __init__(self, path: str, message: str, fix: str | None = None) -> None:
        self.path = path
        self.message = message
        self.fix = fix
        text = f"{path}: {message}" if path else message
        if fix:
            text = f"{text}; {fix}"
        super().__init__(" ".join(text.split()))

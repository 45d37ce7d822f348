"""Live checking of a fleet config being edited: the scenario as TOML or as its JSON
form, checked by the emulator's own validator, the first problem given by key path.

The page's form and raw TOML both go through :func:`scenario_check`. The form sends
its changes as ``edits`` to the TOML as written (set a key, clear it, add or remove
a table, rename a model), applied by :mod:`reviewer.fleets.toml_edit` so the
reviewer's comments and layout stay; the answer carries the edited TOML (valid or
not, so nothing typed is lost) and the form of it (:func:`form_groups`). Nothing is
saved here; saving makes a new version through
:func:`reviewer.review.services.fleet_config_save`.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from emulator.scenario import Scenario, ScenarioError
from emulator.scenario.limits import loads_toml
from reviewer.errors import Invalid
from reviewer.fleets import toml_edit
from reviewer.fleets.form_catalog import form_groups
from reviewer.fleets.scenario_toml import trace_path_problem

__all__ = ["apply_edits", "scenario_check"]

EDIT_OPS = ("set", "unset", "add", "remove", "rename")
EDITS_MAX = 50


def _problem(path: str, message: str) -> dict[str, Any]:
    return {"valid": False, "toml": None, "scenario": None, "error": {"path": path, "message": message}}


def _rename_model(text: str, old: str, new: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", new):
        raise Invalid("edits", f"models.{old}: a model name is letters, digits, _ and -; {new!r} is not")
    header = re.compile(rf"^(\s*\[+\s*models\.){re.escape(old)}(\s*[\].])", re.M)
    out, n = header.subn(rf"\g<1>{new}\g<2>", text)
    if not n:
        raise toml_edit.TomlEditError(f"models.{old}: not written as its own table; rename it in the TOML pane")
    return out


def apply_edits(text: str, edits: Any) -> str:
    """``text`` with the form's ``edits`` applied in order, each one line of the
    TOML changed in place (see :mod:`reviewer.fleets.toml_edit`). Raises
    ``Invalid`` naming the edit that cannot be made and what to do instead."""
    if not isinstance(edits, list) or len(edits) > EDITS_MAX:
        raise Invalid("edits", f"edits: give a list of at most {EDITS_MAX} changes")
    for i, edit in enumerate(edits):
        if not isinstance(edit, dict) or edit.get("op") not in EDIT_OPS:
            raise Invalid("edits", f"edits[{i}]: give {{\"op\": one of {', '.join(EDIT_OPS)}, \"path\": ...}}")
        op, path = edit["op"], str(edit.get("path") or "")
        try:
            if op == "set":
                value = edit.get("value")
                if not isinstance(value, str | int | float | bool | list):
                    raise Invalid("edits", f"{path}: give a number, a word, true/false or a list")
                text = toml_edit.set_key(text, path, value)
            elif op == "unset":
                text = toml_edit.remove_key(text, path)
            elif op == "add":
                values = edit.get("values")
                if not isinstance(values, dict):
                    raise Invalid("edits", f"{path}: give the new table's keys as values")
                text = toml_edit.add_table(text, path, values)
            elif op == "remove":
                text = toml_edit.remove_table(text, path)
            else:
                text = _rename_model(text, path.removeprefix("models."), str(edit.get("to") or "").strip())
        except toml_edit.TomlEditError as exc:
            raise Invalid("edits", str(exc)) from None
    return text


def scenario_check(*, toml: str | None = None, scenario: Any = None, edits: Any = None) -> dict[str, Any]:
    """Check a scenario given as ``toml`` text or as a ``scenario`` object.

    With ``edits`` (the form's changes, see :func:`apply_edits`) they are applied to
    ``toml`` first.

    Returns ``{"valid", "toml", "scenario", "error", "form"}``: when valid, the
    scenario's JSON form and its TOML (the text given or edited, or canonical TOML
    made from the object); otherwise ``error`` is ``{"path", "message"}``, the key
    path at fault (``""`` for the document as a whole) and the emulator's one-line
    message with its fix. ``form`` is the editor's form of the scenario as written
    (:func:`form_groups`; None when the TOML cannot be read), and an edited TOML
    comes back as ``toml`` even when it is not valid, so the reviewer keeps it.
    """

    if toml is None and scenario is None:
        raise Invalid("toml", "toml: give the scenario as toml text or as a scenario object")
    if edits is not None:
        if toml is None:
            raise Invalid("toml", "toml: edits change the scenario's TOML text; give it as toml")
        toml = apply_edits(toml, edits)
    edited = toml if edits is not None else None
    if toml is not None:
        if not toml.strip():
            return {**_problem("", "scenario: empty; write a scenario in the emulator's TOML format"),
                    "toml": edited, "form": None}
        try:
            data = loads_toml(toml)
        except ScenarioError as exc:
            return {**_problem(exc.path if exc.path != "scenario" else "", str(exc)), "toml": edited, "form": None}
    elif isinstance(scenario, dict):
        data = scenario
    else:
        raise Invalid("scenario", "scenario: give the scenario as an object")
    problem = trace_path_problem(data)
    if problem:
        return {**_problem("traffic.trace", problem), "toml": edited, "form": form_groups(data)}
    try:
        checked = Scenario.from_dict(data, max_requests=settings.RUN_REQUEST_BUDGET)
    except ScenarioError as exc:
        return {**_problem(exc.path, str(exc)), "toml": edited, "form": form_groups(data)}
    return {"valid": True, "toml": toml if toml is not None else checked.to_toml(),
            "scenario": checked.to_dict(), "error": None, "form": form_groups(data, checked)}

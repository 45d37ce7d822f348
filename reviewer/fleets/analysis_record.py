"""The one analysis of a fleet config version, stored with it.

``analysis_record(version)`` is ``emulator.analysis.record.fleet_record`` of the
version's scenario (and of its doc's latest revision, for the doc's figures): worked
out the first time anyone reads it and stored on the version, so the numbers pass and
every export read the same figures and none parses the scenario or reruns the analysis
again. A record of an older form (``RECORD_VERSION``) is worked out again. A version
never changes, so its record never goes stale.
"""

from __future__ import annotations

from typing import Any

from reviewer import selectors
from reviewer.models.review import FleetConfig, FleetConfigVersion

__all__ = ["analysis_record", "latest_record"]


def analysis_record(version: FleetConfigVersion) -> dict[str, Any] | None:
    """The version's record (None when the emulator no longer accepts its scenario)."""
    from emulator.analysis.record import RECORD_VERSION, fleet_record
    from emulator.scenario import Scenario, ScenarioError

    stored = version.analysis
    if isinstance(stored, dict) and stored.get("version") == RECORD_VERSION:
        return stored
    try:
        scenario = Scenario.from_dict(version.scenario, max_requests=None)
    except ScenarioError:
        return None
    # The doc's figures come from a doc the config's owner still sees.
    doc = selectors.linked_doc(version.config, version.config.owner)
    record = fleet_record(scenario, doc.body if doc is not None else None)
    FleetConfigVersion.objects.filter(pk=version.pk).update(analysis=record)
    version.analysis = record
    return record


def latest_record(config: FleetConfig | None) -> dict[str, Any] | None:
    """The record of a config's latest version (None without one)."""
    if config is None:
        return None
    version = config.latest_version()
    return None if version is None else analysis_record(version)

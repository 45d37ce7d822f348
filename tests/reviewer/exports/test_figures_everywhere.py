"""For every preset and both example fleet configs: the numbers page, the CLI, placement
and each export give the same capacity, headroom and floor figures, because all of them
read the one analysis stored with the fleet config's version."""

from __future__ import annotations

import contextlib
import io
import json
from importlib import resources
from pathlib import Path

import pytest
from django.test import Client

from emulator.cli import main
from emulator.scenario.presets import PRESETS
from reviewer.review import services

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "reviewer" / "review" / "example" / "chat-70b-fleet.toml"
# The presets (the seed's example, doc-as-written, among them) and the second example.
CONFIGS = [*sorted(PRESETS), str(EXAMPLE)]


def _text(name: str) -> str:
    if name in PRESETS:
        return resources.files("emulator.scenario.presets").joinpath(f"{name}.toml").read_text("utf-8")
    return Path(name).read_text("utf-8")


def _cli(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--json"]) == 0
    return json.loads(out.getvalue())


def _about(key: str) -> bool:
    """Figures of capacity, headroom or floors."""
    return any(word in key for word in ("capacity", "floor", "lost", "throughput", "gap_"))


@pytest.mark.parametrize("name", CONFIGS, ids=[Path(n).stem for n in CONFIGS])
def test_the_page_the_cli_placement_and_the_exports_agree(name, django_user_model):
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    doc = services.doc_create(owner=owner, title="Doc", body="# Doc\n\nA design.\n")
    config = services.fleet_config_create(owner=owner, name="f", toml=_text(name), doc=doc)
    session = services.session_create(owner=owner, doc=doc, fleet_config=config)
    client = Client()
    client.force_login(owner)

    cli = _cli("numbers", name)
    printed = {(f["model"], f["key"]): f for f in cli["figures"]}
    about = {ref: f for ref, f in printed.items() if _about(ref[1])}
    assert about  # every config has capacity figures

    page = client.get(f"/sessions/{session.pk}/numbers.json").json()
    shown = {(f["model"], f["key"]): f for f in page["figures"]}
    assert {ref: (f["value"], f["display"]) for ref, f in shown.items() if ref in about} == {
        ref: (f["value"], f["display"]) for ref, f in about.items()}
    assert page["analysis"] == cli["analysis"]
    assert [(h["slot"], h["display"]) for h in page["headline"]] == [(h["slot"], h["display"]) for h in cli["headline"]]

    exported = client.get(f"/api/sessions/{session.pk}/export.json").json()
    assert exported["numbers"]
    for figure in exported["numbers"]:
        assert (figure["value"], figure["display"]) == (printed[figure["model"], figure["key"]]["value"],
                                                       printed[figure["model"], figure["key"]]["display"])
    report = client.get(f"/api/sessions/{session.pk}/export.md").content.decode()
    for figure in exported["numbers"]:
        assert f": {figure['display']} (" in report and figure["label"] in report

    # Placement: the CLI's cases for the layout as configured are the export's, and
    # what each model keeps under each host's loss is the analysis's headroom.
    placement = exported["placement"]
    if placement is None:
        return  # the puzzle does not apply (hosts of mixed sizes)
    placed = _cli("place", "--scenario", name)["current"]
    assert placement["as_configured"]["cases"] == [
        {"failure": c["failure"], "model_capacity": c["model_capacity"]} for c in placed["cases"]]
    assert placement["as_configured"]["models_down_with"] == placed["models_down_with"]
    analysis = cli["analysis"]
    fixed = [m for m, a in analysis["models"].items() if a["autoscaler"] is None]
    losses = {f"host:{h['host']}": h["capacity_qps"] for h in analysis["losses"]}
    for case in placed["cases"]:
        for model in fixed:
            expected = (analysis["models"][model]["capacity_qps"] if case["failure"] == "none"
                        else losses[case["failure"]][model])
            assert case["model_capacity"][model] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    for model in fixed:
        worst = analysis["models"][model]["worst_loss"]
        if worst is not None:
            assert printed[model, "capacity_one_host_lost_qps"]["value"] == pytest.approx(worst["capacity_qps"])
            assert min(c["model_capacity"][model] for c in placed["cases"][1:]) == pytest.approx(worst["capacity_qps"])

"""An autoscaled fleet read at the top of its range: each autoscaler's max_workers placed
where it may place them, the layout the analysis and the capacity benchmark share."""

from __future__ import annotations

from emulator.analysis.fleet import analyse
from emulator.analysis.fleet.grown import grown_hosts
from emulator.scenario import Scenario, load_scenario


def test_each_pool_autoscaler_grows_its_pool_on_its_own_hosts_only():
    scenario = load_scenario("disagg-planner-ramp", max_requests=None)  # prefill 1 -> 6, decode 1 -> 4
    hosts, notes = grown_hosts(scenario)
    assert hosts == [[("chat", 0), ("chat", 4)]] * 5  # three prefill hosts, two decode hosts, full
    assert notes == ["[pools.prefill.autoscaler] replaced by its max_workers = 6 placed",
                     "[pools.decode.autoscaler] replaced by its max_workers = 4 placed"]


def test_the_analysis_reads_a_scaled_pool_at_its_max_workers_and_says_what_it_starts_with():
    grown = analyse(load_scenario("disagg-planner-ramp", max_requests=None))
    chat = grown.models["chat"]
    assert [(p.role, p.workers, p.start_workers, p.hosts) for p in chat.pools] == [
        ("prefill", 6, 3, (0, 0, 1, 1, 2, 2)), ("decode", 4, 2, (3, 3, 4, 4))]
    # The same fleet with those workers written out and no autoscalers has the same capacity.
    data = load_scenario("disagg-planner-ramp", max_requests=None).to_dict()
    for group in data["hosts"]:
        group["workers"] = ["chat@0", "chat@4"]
    for table in data["pools"].values():
        del table["autoscaler"]
    fixed = analyse(Scenario.from_dict(data, max_requests=None))
    assert fixed.capacity_qps == grown.capacity_qps
    assert [p.start_workers for p in fixed.models["chat"].pools] == [None, None]
    # Losing a decode host leaves half the decode pool: half the capacity.
    loss = next(h for h in grown.losses if h.host == 3)
    assert loss.capacity_qps["chat"] == grown.models["chat"].capacity_qps / 2

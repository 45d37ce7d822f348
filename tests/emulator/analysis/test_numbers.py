"""The numbers pass on doc-as-written, the rounding rule, and the suggested findings."""

from __future__ import annotations

from fractions import Fraction

import pytest
from scenarios import EXAMPLE

from emulator.analysis.numbers import compute, show
from emulator.scenario import load_scenario


@pytest.fixture(scope="module")
def doc():
    return compute(load_scenario(EXAMPLE, max_requests=None))


def test_it_makes_20_requests_a_batch(doc):
    assert doc.value("requests_per_batch", "small") == 20
    assert doc.value("requests_per_batch", "fleet") == 20


def test_it_gives_about_13_3_qps_per_worker(doc):
    assert doc.value("worker_qps", "big") == Fraction(40, 3)
    assert doc.get("worker_qps", "big").display == "13.3 QPS"


def test_it_needs_about_750_workers_at_peak_and_75_at_average(doc):
    assert doc.value("workers_needed_peak") == 750
    assert doc.value("workers_needed_avg") == 75
    # Whole workers per model: 37.5 rounds up to 38 for each of the two models.
    assert doc.value("whole_workers_avg") == 76
    assert doc.value("whole_workers_avg", "small") == 38


def test_it_finds_30_units_hold_at_most_15_small_workers_about_200_qps(doc):
    assert doc.value("most_workers") == 15
    assert doc.value("most_capacity_qps") == 200
    assert "small" in doc.get("most_workers").explain
    # Per model the answer differs: big workers alone would be 6.
    assert doc.value("most_workers", "big") == 6
    assert doc.value("most_workers", "small") == 15


def test_it_finds_a_gap_of_50_at_peak_and_5_at_average_against_the_most_the_hosts_give(doc):
    # The seed's napkin: 10k QPS against 15 small workers (200 QPS), the split ignored.
    assert doc.value("gap_most_peak") == 50
    assert doc.value("gap_most_avg") == 5


def test_it_gives_the_gap_for_the_layout_as_placed_with_the_best_mix_beside_it(doc):
    # 2 big / 2 big / 5 small at 50/50: big saturates first at 4 x 40/3 / 0.5 = 106.7 QPS.
    assert doc.value("capacity_at_split_qps") == Fraction(320, 3)
    assert doc.value("gap_peak") == 10000 / Fraction(320, 3)
    assert doc.get("gap_peak").display == "93.8x"
    assert doc.value("gap_best_mix_peak") == doc.value("gap_peak")
    assert "as placed" in doc.get("gap_peak").label


def test_it_shows_the_queue_growing_by_800_a_second_even_with_the_most_workers(doc):
    assert doc.value("queue_growth_most_avg") == 800
    placed = doc.value("queue_growth_avg")
    assert placed == 1000 - 120 and placed > 800
    assert doc.value("capacity_qps") == 120


def test_it_fills_a_20_request_batch_in_20_ms_at_1k_qps(doc):
    assert doc.value("fill_time_avg_s") == Fraction(1, 50)
    assert doc.get("fill_time_avg_s").display == "20 ms"
    # Each model's dispatcher sees half the traffic, so its batches take twice as long.
    assert doc.value("fill_time_avg_s", "small") == Fraction(1, 25)


def test_it_gives_the_latency_floor_as_a_minimum_and_littles_law_on_the_mean(doc):
    # The least a request takes is one batch's service time; the first of a batch waits it to fill.
    assert doc.value("latency_floor_s") == doc.value("latency_floor_s", "small") == Fraction(3, 2)
    assert doc.value("latency_max_avg_s", "small") == Fraction(1, 25) + Fraction(3, 2)
    assert doc.value("latency_max_quiet_s", "big") == 20 + Fraction(3, 2)
    assert doc.value("batch_wait_avg_s", "small") == Fraction(19, 1000)
    mean = Fraction(19, 1000) + Fraction(3, 2)
    assert doc.value("latency_mean_avg_s", "small") == mean
    assert doc.value("in_system_avg", "small") == 500 * mean
    # At 1 request a second the mean request waits (20 - 1) / 2 s, not the whole fill.
    assert doc.value("in_system_quiet", "big") == Fraction(19, 2) + Fraction(3, 2)


def test_it_reports_utilisation_and_the_best_mix(doc):
    assert doc.value("utilisation_avg", "small") == Fraction(500) / (5 * Fraction(40, 3))
    assert doc.get("utilisation_avg").label == "Utilisation at average traffic"
    assert doc.value("utilisation_avg") == 1000 / Fraction(320, 3)
    assert doc.value("best_mix_qps") == 4 * Fraction(40, 3) / Fraction(1, 2)
    assert doc.value("best_mix_one_host_lost_qps") == 2 * Fraction(40, 3) / Fraction(1, 2)


def test_every_figure_has_a_one_line_explanation_and_a_display(doc):
    data = doc.to_dict()
    assert len(data["figures"]) > 50
    for fig in data["figures"]:
        assert fig["explain"] and "\n" not in fig["explain"]
        assert fig["display"] and set(fig) == {"key", "label", "model", "value", "display", "unit", "explain",
                                               "inputs"}
        assert all(isinstance(k, str) for k in fig["inputs"])


def test_it_suggests_the_seed_findings(doc):
    by_title = {f["title"]: f for f in doc.findings}
    assert all(f["pass"] == "numbers" for f in doc.findings)
    gap = by_title["Capacity is about 93.8x short of the peak goal"]
    assert gap["severity"] == "fix_now" and "200 QPS" in gap["body"] and "750 workers" in gap["body"]
    assert "fleet.gap_peak" in gap["figures"] and "traffic.peak_qps" in gap["inputs"]
    growth = next(f for f in doc.findings if f["title"].startswith("At average traffic the queue grows by 880"))
    assert growth["severity"] == "fix_now" and "nothing sheds load" in growth["body"]
    close = by_title["No rule says when a partial batch closes"]
    assert close["severity"] == "clarify" and "20 s" in close["body"]
    floor = next(f for f in doc.findings if f["title"].startswith('"Low latency" cannot mean sub-second'))
    assert floor["severity"] == "clarify" and "1.5 s" in floor["title"]
    assert by_title["Losing host:2 takes small down"]["severity"] == "fix_now"
    assert doc.findings[0]["severity"] == "fix_now"


def test_a_sized_fleet_with_a_close_rule_draws_no_capacity_or_close_findings():
    base = load_scenario(EXAMPLE, max_requests=None)
    sized = base.with_overrides(["hosts[0].count=188", "hosts[1].count=75", "dispatcher.close_after_s=0.05"])
    report = compute(sized)
    titles = " ".join(f["title"] for f in report.findings)
    assert "short of the peak" not in titles and "queue grows" not in titles
    assert "partial batch" not in titles
    assert report.value("queue_growth_avg", "big") == 0
    # The close rule caps the fill wait at quiet hours.
    assert report.value("latency_max_quiet_s", "big") == Fraction(1, 20) + Fraction(3, 2)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (Fraction(40, 3), "QPS", "13.3 QPS"),
        (Fraction(750), "workers", "750 workers"),
        (Fraction(320, 3), "QPS", "107 QPS"),
        (Fraction(14800, 3), "requests/s", "4933 requests/s"),
        (Fraction(1, 50), "s", "20 ms"),
        (Fraction(19, 10000), "s", "1.9 ms"),
        (Fraction(77, 50), "s", "1.54 s"),
        (Fraction(15, 2), "x", "7.5x"),
        (Fraction(0), "QPS", "0 QPS"),
        (None, "x", "n/a"),
        (Fraction(1, 8), "x", "0.125x"),
        (Fraction(5, 2000), "x", "0.0025x"),  # half to even: 0.0025 stays as is
    ],
)
def test_it_shows_figures_by_one_rounding_rule(value, unit, text):
    assert show(value, unit) == text


def test_it_rounds_half_to_even():
    assert show(Fraction(12345, 1000), "") == "12.3"  # 12.345 -> 12.3 (3 s.f.)
    assert show(Fraction(1225, 100), "") == "12.2"  # 12.25 -> 12.2, not 12.3


def _doc(*overrides):
    return compute(load_scenario(EXAMPLE, max_requests=None).with_overrides(list(overrides)))


def titles(report):
    return {f["title"]: f["severity"] for f in report.findings}


def test_it_gives_each_models_capacity_after_losing_its_worst_host(doc):
    assert doc.value("capacity_one_host_lost_qps", "small") == 0
    assert doc.value("capacity_one_host_lost_qps", "big") == 2 * Fraction(40, 3)
    assert "host:2" in doc.get("capacity_one_host_lost_qps", "small").explain


def test_it_flags_a_single_host_loss_that_overloads_a_model_once():
    found = titles(_doc("traffic.qps=80"))
    assert found["Losing host:2 takes small down"] == "fix_now"
    assert found["One host loss overloads big at average traffic"] == "clarify"
    assert "One host loss overloads small at average traffic" not in found
    assert not any("queue grows" in t for t in found)


def test_it_mentions_little_headroom_near_saturation():
    found = titles(_doc("traffic.qps=110", "hosts[0].count=4"))
    assert found["small runs 82.5% busy at average traffic"] == "mention"


def test_it_says_what_caps_each_model_when_the_queue_grows():
    report = _doc("traffic.qps=150")
    growth = next(f for f in report.findings if "queue grows by 30 requests" in f["title"])
    assert "small: 75 QPS offered for 66.7 QPS (5 workers x 13.3 QPS)" in growth["body"]


def test_it_lists_findings_most_severe_first(doc):
    order = {"fix_now": 0, "clarify": 1, "mention": 2}
    ranks = [order[f["severity"]] for f in doc.findings]
    assert ranks == sorted(ranks)


def test_it_times_a_partly_filled_batch_when_service_is_linear_in_tokens():
    report = _doc("worker.service=linear", "models.big.tokens=600")
    assert report.value("requests_per_batch", "big") == 16
    assert report.value("batch_service_s", "big") == Fraction(3, 2) * Fraction(9600, 10000)
    assert report.value("worker_qps", "big") == Fraction(10000, 600) / Fraction(3, 2)
    assert report.value("worker_qps", "small") == Fraction(40, 3)


def test_it_says_why_a_best_mix_figure_is_missing_on_a_huge_fleet():
    report = _doc("hosts[0].count=6000")
    fig = report.get("best_mix_qps")
    assert fig.value is None and fig.display == "n/a"
    assert fig.explain.startswith("not computed: hosts:")


def test_it_explains_a_scenario_with_no_traffic_instead_of_dividing_by_zero():
    report = _doc("traffic.qps=0", "traffic.peak_qps=0")
    assert report.value("offered_avg_qps") == 0
    assert report.value("fill_time_avg_s") is None
    assert report.value("fill_time_avg_s", "small") is None
    assert report.value("capacity_qps", "small") == Fraction(200, 3)


# -- continuous batching ---------------------------------------------------------------


def test_it_gives_a_continuous_model_token_figures_not_batch_ones() -> None:
    from emulator.scenario.presets import load_preset

    report = compute(load_preset("continuous-comfortable"))
    keys = {f.key for f in report.figures if f.model == "chat"}
    assert {"max_concurrent_seqs", "ttft_floor_s", "tpot_floor_s", "worker_qps"} <= keys
    assert not keys & {"requests_per_batch", "fill_time_avg_s", "latency_max_avg_s"}
    # A running sequence holds its prompt and, weighted by how long it runs, the mean of
    # its generated tokens: for lognormal outputs of cv 1 that is the mean output plus
    # a half, so 200,000 KV tokens hold 200,000 // 1250.5 = 159 sequences.
    assert report.value("kv_running_tokens", "chat") == Fraction(2501, 2)
    assert report.value("max_concurrent_seqs", "chat") == 159
    # One prefill step: 0.006 + 1000 x 2.5e-5 = 31 ms.
    assert report.value("ttft_floor_s", "chat") == Fraction(31, 1000)
    # One decode step alone: 0.006 + 0.00012 + 2e-8 x 1001.
    assert report.value("tpot_floor_s", "chat") == Fraction(6, 1000) + Fraction(12, 100000) + Fraction(2002, 10**8)
    assert all(f.model != "fleet" or f.key != "latency_floor_s" for f in report.figures)


def test_it_finds_a_tpot_goal_under_the_decode_floor_and_a_kv_too_small() -> None:
    from emulator.scenario.presets import load_preset

    storm = compute(load_preset("kv-preemption-storm").with_overrides(["slo.tpot_s=0.005"]))
    titles = [f["title"] for f in storm.findings]
    assert any("TPOT goal is under" in t for t in titles)
    # 40 QPS is over what four workers whose KV cache holds 35 sequences complete: the
    # finding says the KV cache is what caps them.
    growth = next(f for f in storm.findings if "queue grows" in f["title"])
    assert "capped by the KV cache; a worker's KV cache holds 35 sequences" in growth["body"]
    comfortable = compute(load_preset("continuous-comfortable"))
    assert not any("KV cache" in f["title"] or "TPOT" in f["title"] for f in comfortable.findings)


def test_the_headline_names_the_model_in_most_trouble_whatever_order_the_models_come_in():
    from fractions import Fraction

    from emulator.analysis.numbers import Figure, NumbersReport, headline
    from emulator.scenario.presets import load_preset

    figures = [
        Figure("capacity_one_host_lost_qps", "Capacity after losing the worst host", "small", Fraction(0), "QPS", ""),
        Figure("capacity_one_host_lost_qps", "Capacity after losing the worst host", "big", Fraction(80, 3), "QPS", ""),
        Figure("latency_floor_s", "Latency floor", "small", Fraction(3, 2), "s", ""),
        Figure("latency_floor_s", "Latency floor", "big", Fraction(2), "s", ""),
    ]
    for order in (figures, list(reversed(figures))):
        shown = {h["slot"]: (h["model"], h["display"])
                 for h in headline(NumbersReport("x", figures=order), load_preset("doc-as-written"))}
        assert shown["after the worst host loss"] == ("small", "0 QPS")  # the least capacity left
        assert shown["latency floor (a minimum)"] == ("big", "2 s")  # the highest floor

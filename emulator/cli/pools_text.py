"""The run summary's table of disaggregated models: each pool's TTFT and TPOT, the
KV transfers, stranded requests and the prefill pool's backlog at the end; and a line
per pipeline group (``pools.pipeline``): its long prompts' prefill and client TTFT."""

from __future__ import annotations

from emulator.sim.results import Summary


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def pool_table(s: Summary) -> str | None:
    """The table, or None when no model is disaggregated."""
    rows = [(name, o.pools) for name, o in s.per_model.items() if o.pools]
    if not rows:
        return None
    cols = (
        ("prefill_ttft_p50", 17), ("prefill_ttft_p99", 17), ("decode_ttft_p50", 16),
        ("decode_ttft_p99", 16), ("decode_tpot_p50", 16), ("transfer_p50", 13),
        ("transfers", 10), ("moving_end", 11), ("stranded", 9), ("backlog_end", 12),
        ("skipped", 8),
    )
    lines = ["disaggregated" + "".join(f"{c:>{w}}" for c, w in cols)]
    for name, p in rows:
        values = (
            _s(p["prefill_ttft_s"].get("p50")), _s(p["prefill_ttft_s"].get("p99")),
            _s(p["decode_ttft_s"].get("p50")), _s(p["decode_ttft_s"].get("p99")),
            _s(p["decode_tpot_s"].get("p50")), _s(p["transfer_s"].get("p50")),
            f"{p['transfers']:,}", f"{p['transfers_in_flight_end']:,}", f"{p['stranded']:,}",
            f"{p['prefill_backlog_end']:,}", f"{p['skipped_prefill']:,}",
        )
        lines.append(f"{name[:13]:<13}" + "".join(f"{v:>{w}}" for v, (_, w) in zip(values, cols, strict=True)))
    lines.append(
        "prefill TTFT: arrival to the prefill worker's token; decode TTFT: from that token to "
        "the client's first (transfer, wait for room, one step); backlog: prefill queues plus "
        "prefilled requests waiting for a decode worker"
    )
    for name, p in rows:
        g = p.get("pipeline")
        if g is None:
            continue
        pre, client = g["prefill_ttft_s"], g["client_ttft_s"]
        lines.append(
            f"pipelined ({name}): {g['pipelined']:,} prompts over {g['threshold_tokens']:,} tokens on workers "
            f"{', '.join(str(w) for w in g['stages'])}; prefill TTFT p50 {_s(pre.get('p50'))} s, max "
            f"{_s(pre.get('max'))} s; client TTFT p50 {_s(client.get('p50'))} s, max {_s(client.get('max'))} s; "
            f"{g['within_ttft_slo']:,} of {g['delivered']:,} answered within the TTFT goal"
        )
    return "\n".join(lines)

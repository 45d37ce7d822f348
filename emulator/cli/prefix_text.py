"""The run summary's prefix-caching lines: hit rate and prefill tokens saved, for the
fleet and per model, then each worker's hit rate."""

from __future__ import annotations

from emulator.sim.results import Summary


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def format_prefix(s: Summary) -> str:
    """A table of prefix hit rates and prefill tokens saved, and the workers' rates."""
    lines = [f"{'':<10}{'prefix_hit':>11}{'prefix_tokens':>15}{'prefill_saved':>15}"]
    for label, o in (("all", s), *((m[:10], o) for m, o in s.per_model.items())):
        if not o.prefix:
            continue
        lines.append(
            f"{label:<10}{_pct(o.prefix_hit_rate):>11}{o.prefix_tokens_seen:>15,}"
            f"{o.prefill_tokens_saved:>15,}"
        )
    rates = s.prefix_hit_rate_by_worker
    if rates:
        lines.append("prefix hit rate by worker: " + " ".join(_pct(r) for r in rates))
    return "\n".join(lines)

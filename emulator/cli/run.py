"""``python -m emulator``: run scenarios and list presets from the command line.

Subcommands are added by the functions in ``REGISTER``; each takes the argparse
subparsers object, adds its parser and sets ``func`` (called with the parsed args,
returning the exit status). Another module adds a subcommand by appending its register
function to that list. A user's mistake exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any, NoReturn

from emulator.cli import calibrate as cli_calibrate
from emulator.cli import numbers as cli_numbers
from emulator.cli import place as cli_place
from emulator.cli import trace_stats as cli_trace_stats
from emulator.cli.pools_text import pool_table
from emulator.cli.prefix_text import format_prefix
from emulator.scenario import ScenarioError, load_scenario
from emulator.scenario.presets import PRESETS
from emulator.sim.engine import Engine
from emulator.sim.results import Outcomes, Summary

#: A function that adds one subcommand to the subparsers (its return value is ignored).
Register = Callable[[Any], object]

#: Seconds of wall time after which a run shows a progress bar (unless --json).
PROGRESS_AFTER_S = 2.0
_STEPS = 200


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def register_run(sub: Any) -> None:
    """``run FILE|PRESET [--seed N] [--set K=V ...] [--json] [--frames OUT.jsonl]``."""
    p = sub.add_parser("run", help="run a scenario file or preset and print its summary")
    p.add_argument("scenario", metavar="FILE|PRESET", help="a scenario TOML file or a preset name")
    p.add_argument(
        "--seed", type=_seed, default=None, help="random seed (default: the scenario's)"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key by dotted path, e.g. traffic.qps=10000 or hosts[0].count=150",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--frames", metavar="OUT.jsonl", help="also write every frame, one JSON a line")
    p.set_defaults(func=cmd_run)


def _seed(text: str) -> int:
    """A seed is a whole number, 0 or more (numpy refuses negative ones)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0; give a seed of 0 or more")
    return value


def register_presets(sub: Any) -> None:
    """``presets``: one line per shipped scenario."""
    p = sub.add_parser("presets", help="list the shipped scenarios")
    p.set_defaults(func=cmd_presets)


#: Subcommand registrations, in the order ``--help`` lists them.
REGISTER: list[Register] = [
    register_run,
    register_presets,
    cli_numbers.register,
    cli_place.register,
    cli_trace_stats.register,
    cli_calibrate.register,
]


def cmd_presets(args: argparse.Namespace) -> int:
    """Print each preset's name and description on one line."""
    width = max(len(n) for n in PRESETS)
    for name, description in PRESETS.items():
        print(f"{name:<{width}}  {description}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run a scenario to its end and print the summary."""
    scenario = load_scenario(args.scenario)
    if args.overrides:
        scenario = scenario.with_overrides(args.overrides)
        for note in scenario.notes:
            print(f"note: {note}", file=sys.stderr)
    engine = Engine(scenario, seed=args.seed)
    out: IO[str] | None = None
    if args.frames:
        try:
            out = open(args.frames, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise ScenarioError(
                "--frames", f"cannot write {args.frames} ({exc.strerror})"
            ) from None
    bar = _Progress(enabled=not args.json)
    try:
        step = scenario.duration_s / _STEPS
        k = 0
        while not engine.done:
            k += 1
            frames = engine.advance_to(min(k * step, scenario.duration_s))
            if out is not None:
                try:
                    for frame in frames:
                        out.write(json.dumps(frame.to_dict(), separators=(",", ":")) + "\n")
                except OSError as exc:  # a full disk, say: the user's to fix, not a bug
                    raise ScenarioError(
                        "--frames", f"cannot write {args.frames} ({exc.strerror})"
                    ) from None
            bar.show(engine.now_s, scenario.duration_s)
    finally:
        bar.clear()
        if out is not None:
            try:
                out.close()
            except OSError as exc:  # the last buffered frames did not fit either
                raise ScenarioError(
                    "--frames", f"cannot write {args.frames} ({exc.strerror})"
                ) from None
    summary = engine.summary()
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(format_summary(scenario.name, summary))
    return 0


class _Progress:
    """A one-line progress bar on stderr, shown once a run takes a while."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty() or enabled and _force_progress()
        self.started = time.perf_counter()
        self.shown = False
        self.last = -1

    def show(self, now_s: float, duration_s: float) -> None:
        if not self.enabled or time.perf_counter() - self.started < PROGRESS_AFTER_S:
            return
        frac = now_s / duration_s if duration_s else 1.0
        if int(frac * 100) == self.last:
            return
        self.last = int(frac * 100)
        filled = int(frac * 30)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%} "
            f"{now_s:,.0f}/{duration_s:,.0f} s simulated"
        )
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 70 + "\r")
            sys.stderr.flush()


def _force_progress() -> bool:
    return os.environ.get("EMULATOR_PROGRESS") == "1"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.2f}"


def format_summary(name: str, s: Summary) -> str:
    """A readable table of the summary: outcomes and latency, fleet and per model."""
    cols = ("offered", "ok", "timed_out", "shed", "lost", "orphaned", "in_system_end")
    head = f"{'':<10}" + "".join(f"{c:>14}" for c in cols) + f"{'served_qps':>12}"
    head += "".join(f"{c:>9}" for c in ("p50_s", "p90_s", "p99_s", "mean_s"))
    lines = [
        f"{name}: {s.sim_s:,.0f} s simulated in {s.wall_s:.2f} s wall, {s.events:,} events",
        head,
    ]

    def row(label: str, o: Outcomes) -> str:
        lat = o.latency_s
        return (
            f"{label:<10}"
            + "".join(f"{getattr(o, c):>14,}" for c in cols)
            + f"{o.served_qps:>12.1f}"
            + "".join(f"{_fmt(lat.get(k)):>9}" for k in ("p50", "p90", "p99", "mean"))
        )

    lines.append(row("all", s))
    for model, o in s.per_model.items():
        lines.append(row(model[:10], o))
    if s.token_level:
        lines.append(_token_table(s))
    if s.prefix:
        lines.append(format_prefix(s))
    if s.autoscale is not None:
        lines.extend(autoscale_lines(s.autoscale))
    for auto in s.pool_autoscale.values():
        lines.extend(autoscale_lines(auto))
    pools = pool_table(s)
    if pools is not None:
        lines.append(pools)
    lines.extend(admission_lines(s))
    lines.append(
        f"wasted batches: {s.wasted_batches:,}; retries offered: {s.retried:,}; "
        f"books balance: {'yes' if s.balanced() else 'NO'}"
    )
    return "\n".join(lines)


def admission_lines(s: Summary) -> list[str]:
    """One line per model that admits by predicted TTFT: the refused, their predictions
    and the admitted's."""
    out = []
    for model, o in s.per_model.items():
        a = o.admission
        if not a:
            continue
        rej, adm = a["rejected_predicted_ttft_s"], a["admitted_predicted_ttft_s"]
        good = a["admitted_goodput"]
        out.append(
            f"admission {model}: refused {a['rejected']:,} ({a['rejected_per_s']:.2f}/s) for a predicted TTFT "
            f"over {a['limit_s']:g} s (predicted p50 {_fmt(rej['p50'])} s, max {_fmt(rej['max'])} s); admitted "
            f"predicted p50 {_fmt(adm['p50'])} s; goodput of the admitted "
            + ("n/a" if good is None else f"{good:.1%}")
        )
    return out


def _token_table(s: Summary) -> str:
    """TTFT, TPOT, the times between tokens (in ms), throughput, preemptions and
    goodput of token-level models."""
    head = (
        f"{'':<10}{'ttft_p50_s':>11}{'ttft_p90_s':>11}{'ttft_p99_s':>11}{'tpot_p50_s':>11}"
        f"{'tpot_p99_s':>11}{'tbt_p50_ms':>11}{'tbt_p99_ms':>11}"
        f"{'out_tok/s':>11}{'preempted':>11}{'slo_goodput':>12}"
    )
    lines = [head]
    for label, o in (("all", s), *((m[:10], o) for m, o in s.per_model.items())):
        if not o.token_level:
            continue
        good = "n/a" if o.slo_goodput is None else f"{o.slo_goodput:.1%}"
        lines.append(
            f"{label:<10}{_fmt(o.ttft_s.get('p50')):>11}{_fmt(o.ttft_s.get('p90')):>11}"
            f"{_fmt(o.ttft_s.get('p99')):>11}"
            f"{_fmt(o.tpot_s.get('p50')):>11}{_fmt(o.tpot_s.get('p99')):>11}"
            f"{_ms(o.tbt_s.get('p50')):>11}{_ms(o.tbt_s.get('p99')):>11}"
            f"{o.output_tokens_per_s:>11,.0f}{o.preemptions:>11,}{good:>12}"
        )
    return "\n".join(lines)


#: Scale events the summary lists (the rest are in ``--json``).
MAX_SCALE_ROWS = 40


def autoscale_lines(auto: dict[str, Any]) -> list[str]:
    """The autoscaler's part of the summary: totals, then its scale decisions (a run
    of blocked looks in one row; readiness and parking are counted, not listed)."""
    c = auto["workers_end"]
    if "per_worker_qps" in auto:  # the SLO planner: its per-worker rate and target
        within = "" if auto["target_s"] is None else f" within {auto['target_s']:g} s"
        aim = f"{auto['predictor']}, {auto['per_worker_qps']:.3g} QPS a worker{within}"
    else:
        aim = f"target {auto['target']:g}"
    lines = [
        f"autoscaler ({auto['model']}{' pool ' + auto['pool'] if 'pool' in auto else ''}, "
        f"{auto['metric']}, {aim}): "
        f"{auto['scaled_up']} up, {auto['scaled_down']} down, {auto['blocked']} blocked; "
        f"peak {auto['peak_workers']} workers, {auto['worker_s']:,.0f} worker-seconds; at the end "
        f"{c['active']} active, {c['warming']} warming, {c['draining']} draining, "
        f"{c['parked']} parked, {c['dead']} dead",
    ]
    rows: list[tuple[str, str, str, str, str]] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if run:
            first, last = run[0]["t_s"], run[-1]["t_s"]
            when = f"{first:,.0f}" if len(run) == 1 else f"{first:,.0f}-{last:,.0f}"
            times = "" if len(run) == 1 else f" ({len(run)} looks)"
            rows.append((when, "blocked", "-", "-", run[0]["reason"] + times))
            run.clear()

    for e in auto["events"]:
        if e["direction"] in ("ready", "parked"):
            continue
        if e["direction"] == "blocked":
            run.append(e)
            continue
        flush()
        where = "-" if e.get("host", -1) < 0 else f"{e['host']}:{e['first_unit']}"
        rows.append((f"{e['t_s']:,.0f}", e["direction"], str(e["worker"]), where, e["reason"]))
    flush()
    if rows:
        lines.append(f"{'t_s':>10}  {'scale':<8}{'worker':>7}  {'host:unit':<10}reason")
        for when, direction, worker, where, reason in rows[:MAX_SCALE_ROWS]:
            lines.append(f"{when:>10}  {direction:<8}{worker:>7}  {where:<10}{reason}")
        if len(rows) > MAX_SCALE_ROWS:
            lines.append(f"... {len(rows) - MAX_SCALE_ROWS} more scale events (see --json)")
    return lines


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m emulator`` parser with every registered subcommand."""
    parser = _Parser(prog="python -m emulator", description="Run the serving-system emulator.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for register in REGISTER:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse, run the subcommand, map user errors to exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (`| head`) left early: not an error of ours. Point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

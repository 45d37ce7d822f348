"""Wall time of a 5-point fleet-size sweep with 1 Celery worker, then with 2.

Starts its own valkey, SQLite database and workers on loopback, runs the same
sweep (doc-as-written without its faults at 2000 QPS, 16 small hosts, the
count of big hosts hosts[0].count = 10, 20, 30, 40, 50, speed max)
once per worker count, and prints the wall time from start to the chord's curve.

    python benchmarks/bench_sweep.py [--workers 1,2] [--qps 2000] [--values 10,20,30,40,50]
"""

from __future__ import annotations

import argparse
import time

from live_stack import LiveStack, machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--qps", type=float, default=2000.0, help="traffic.qps of every point")
    parser.add_argument("--values", default="10,20,30,40,50", help="hosts[0].count values")
    parser.add_argument("--small-hosts", type=int, default=16, help="hosts[1].count")
    args = parser.parse_args()
    values = [int(v) for v in args.values.split(",")]

    stack = LiveStack()
    try:
        stack.django()
        from django.contrib.auth import get_user_model

        from emulator.scenario.presets import load_preset
        from reviewer.models import Sweep
        from reviewer.runs.sweeps import sweep_start

        user = get_user_model().objects.create_user("bench")
        scenario = {**load_preset("doc-as-written").to_dict(), "faults": []}
        print(f"machine: {machine()}")
        print(f"sweep: doc-as-written without faults, traffic.qps={args.qps:g}, "
              f"hosts[1].count={args.small_hosts}, hosts[0].count = {values}; 300 simulated s each, "
              f"speed max; target p99 <= 3 s")
        for count in [int(c) for c in args.workers.split(",")]:
            stack.start_workers(count)
            began = time.monotonic()
            sweep = sweep_start(user=user, scenario=scenario, key="hosts[0].count", values=values,
                                overrides=[f"traffic.qps={args.qps:g}",
                                           f"hosts[1].count={args.small_hosts}"],
                                target_p99_s=3.0)
            while True:
                sweep = Sweep.objects.get(pk=sweep.pk)
                if sweep.is_final:
                    break
                if time.monotonic() - began > 600:
                    raise RuntimeError("the sweep did not finish in 600 s")
                time.sleep(0.1)
            wall = time.monotonic() - began
            curve = ", ".join(f"{p['value']:g}: p99 {p['p99_s']:.2f}s ok {p['ok_rate']:.0%}"
                              if p["p99_s"] is not None else f"{p['value']:g}: no ok requests"
                              for p in sweep.curve)
            print(f"{count} worker(s): {wall:6.2f} s wall  [{sweep.status}] curve {curve}; "
                  f"answer: {sweep.answer['text']}", flush=True)
            stack.stop_workers()
    finally:
        stack.close()


if __name__ == "__main__":
    main()

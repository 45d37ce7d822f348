"""``manage.py cleanup_traces``: remove uploaded trace files nothing refers to any more."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from reviewer.fleets.traces import CLEANUP_GRACE_S, traces_cleanup


class Command(BaseCommand):
    help = "Remove uploaded trace files that no fleet config, version, run or sweep names."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="list the files, remove nothing")
        parser.add_argument("--grace-s", type=float, default=CLEANUP_GRACE_S,
                            help=f"keep files younger than this (default {CLEANUP_GRACE_S:g} s)")

    def handle(self, *args: Any, **options: Any) -> None:
        removed = traces_cleanup(grace_s=options["grace_s"], dry_run=options["dry_run"])
        verb = "would remove" if options["dry_run"] else "removed"
        total = sum(p.stat().st_size for p in removed if p.exists()) if options["dry_run"] else None
        for path in removed:
            self.stdout.write(f"cleanup_traces: {verb} {path}")
        self.stdout.write(f"cleanup_traces: {verb} {len(removed)} unreferenced trace file(s)"
                          + (f", {total:,} bytes" if total is not None else ""))

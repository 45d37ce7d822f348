"""Helpers for the browser tests: selecting doc text, waiting, screenshots."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Every browser test user's password.
PASSWORD = "correct-horse-battery"

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-output" / "screenshots"


@dataclass
class LiveServer:
    """Daphne and a Celery worker; ``url`` is where the dashboard answers."""

    url: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def log_tail(self, chars: int = 4000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in self.logs)

    def stop(self) -> None:
        """Kill every process started here, with its children."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=10)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(timeout=5)


@dataclass
class ExampleReview:
    """The example review loaded for one test: owner alice, reviewer bob."""

    session_id: int
    alice: Any
    bob: Any

    @property
    def path(self) -> str:
        return f"/sessions/{self.session_id}/"


def select_text(page: Any, text: str, occurrence: int = 0) -> None:
    """Select ``text`` (its ``occurrence``-th appearance, from 0) in the rendered doc with
    the mouse, as a reader would.

    The text's position is read just before the drag; if the page moved under the
    mouse meanwhile (a late layout change, a re-render), the selection made is not
    the text asked for, and the drag is made again from a fresh position."""
    for _attempt in range(4):
        # The page may move the focus once the mouse is up (the finding form opens), which
        # clears the selection: read it as the button is released, before the page's own
        # handlers run.
        page.evaluate(
            """() => window.addEventListener('mouseup', () => {
                window.__pickedByMouse = window.getSelection().toString();
            }, {capture: true, once: true})"""
        )
        _drag_over(page, text, occurrence)
        picked = page.evaluate("() => window.__pickedByMouse || ''")
        if " ".join(picked.split()) == " ".join(text.split()):
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"could not select {text!r} with the mouse; the page selected {picked[:200]!r}")


def _drag_over(page: Any, text: str, occurrence: int) -> None:
    box = page.evaluate(
        """([text, occurrence]) => {
            const root = document.getElementById('doc-body');
            const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            let seen = 0;
            for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                let i = n.nodeValue.indexOf(text);
                while (i >= 0 && seen < occurrence) { seen++; i = n.nodeValue.indexOf(text, i + 1); }
                if (i < 0) continue;
                const r = document.createRange();
                r.setStart(n, i); r.setEnd(n, i + text.length);
                r.startContainer.parentElement.scrollIntoView({block: 'center'});
                const rects = [...r.getClientRects()];
                const a = rects[0], b = rects[rects.length - 1];
                return {x1: a.left + 1, y1: a.top + a.height / 2, x2: b.right - 1, y2: b.top + b.height / 2};
            }
            return null;
        }""",
        [text, occurrence],
    )
    assert box is not None, f"{text!r} is not in the rendered doc {occurrence + 1} times"
    page.mouse.move(box["x1"], box["y1"])
    page.mouse.down()
    page.mouse.move(box["x2"], box["y2"], steps=8)
    page.mouse.up()


def wait_for(predicate: Any, timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_page(page: Any, expression: str, arg: Any = None, timeout: float = 30000) -> None:
    """Wait until ``expression`` (a JS expression or function) is true in the page.

    Polls with ``page.evaluate``: the pages' Content-Security-Policy forbids the
    in-page eval that ``page.wait_for_function`` relies on.
    """
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout:.0f} ms: {expression}")
        page.wait_for_timeout(100)


def screenshot_path(name: str) -> Path:
    """Where the screenshot called ``name`` goes (the folder is made if missing)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


def screenshot(page: Any, name: str, full_page: bool = False) -> Path:
    """Save a screenshot to test-output/screenshots/<name>.png."""
    path = screenshot_path(name)
    page.screenshot(path=str(path), full_page=full_page)
    return path


def sideways_overflow(page: Any) -> int:
    """How many pixels the page is wider than its viewport (0 or less: none)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def widest_elements(page: Any, limit: int = 5) -> list[str]:
    """The elements reaching furthest past the viewport's right edge, to say what overflows."""
    return list(page.evaluate(
        """(limit) => [...document.querySelectorAll('body *')]
            .map((e) => [e, e.getBoundingClientRect().right])
            .filter(([, r]) => r > window.innerWidth + 0.5)
            .sort((a, b) => b[1] - a[1]).slice(0, limit)
            .map(([e, r]) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${[...e.classList].join('.')} right=${Math.round(r)}`)""",
        limit,
    ))


def assert_fits(page: Any, what: str) -> None:
    """The page is no wider than the viewport; else name what sticks out."""
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"{what} scrolls sideways by {overflow} px: {widest_elements(page)}"


def charts_spilling(page: Any) -> list[str]:
    """Charts (plotly) or tables wider than the run view they sit in."""
    return list(page.evaluate(
        """() => [...document.querySelectorAll('.run-view')].flatMap((view) => {
            const edge = view.getBoundingClientRect().right + 0.5;
            return [...view.querySelectorAll('.js-plotly-plot .main-svg')]
              .filter((c) => c.getBoundingClientRect().right > edge)
              .map((c) => `${view.getAttribute('aria-label')}: ${c.closest('[data-chart]').dataset.chart}`);
        })"""
    ))


PASSES = ["restate", "numbers", "trace", "break", "rank"]


def open_pass(page: Any, key: str) -> None:
    """Show one pass of the session page and wait for what it draws from the fleet config."""
    page.click(f"#tab-{key}")
    panel = page.wait_for_selector(f"#panel-{key}:not([hidden])")
    assert panel.query_selector(".guide") is not None
    if key == "numbers":
        page.wait_for_selector(".numbers-table tbody tr")
        page.wait_for_selector(".suggestion")
    elif key == "trace":
        page.wait_for_selector(".trace-svg .hop")
    elif key == "break":
        page.wait_for_selector(".layout-card .verdict")
        page.wait_for_selector(".run-view button:has-text('Start run')")
    elif key == "rank":
        page.wait_for_selector(".rank-col .rank-card")
    page.wait_for_timeout(150)  # let the panel's layout settle


# continuous-comfortable, shorter, on three hosts in two groups (no [gateway] table),
# with host 1 killed and restored: the token charts carry the fault's markers.
CONTINUOUS_TOML = """
name = "chat-continuous"
duration_s = 60
seed = 1
sample_s = 1.0

[traffic]
qps = 40

[models.chat]
share = 1.0
worker_units = 4
tokens = 1000
tokens_cv = 1.0
output_tokens = 250
output_tokens_cv = 1.0

[dispatcher]
policy = "round_robin"

[worker]
batching = "continuous"
max_num_seqs = 256
max_batched_tokens = 8192
kv_cache_tokens = 200000
step_base_s = 0.006
prefill_token_s = 2.5e-5
decode_seq_s = 1.2e-4
kv_token_s = 2e-8

[client]
timeout_s = 60

[slo]
ttft_s = 2.0
tpot_s = 0.1

[[hosts]]
count = 2
units = 8
workers = ["chat@0", "chat@4"]

[[hosts]]
count = 1
units = 8
workers = ["chat@0"]

[[faults]]
at_s = 20.5
kill = "host:1"

[[faults]]
at_s = 40.5
restore = "host:1"
"""

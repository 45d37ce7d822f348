// Sweeps from the break pass: any key (every host group's count, the QPS, a
// worker key, or one typed), a list of values, the scheduled faults kept or
// dropped, run at full speed on the workers; progress as points done, then the
// curve of p99 and ok-rate against the value and the answer, or why there is none.

import { api, el } from "../lib/api.js";

const POLL_MS = 1000;

export function initSweep(ctx) {
  const box = document.getElementById("sweep-panel");
  if (!box || !ctx.config.fleet) return;
  const scenario = ctx.config.fleet.scenario || {};
  // The server lists the keys with default values the emulator accepts on this fleet
  // (with the scheduled faults kept, and with them dropped).
  const keys = [...(ctx.config.fleet.sweepKeys || []), { key: "", label: "another key…", values: [], values_without_faults: [] }];
  const key = el("select", { "aria-label": "Key to sweep" }, keys.map((k) => el("option", { value: k.key }, k.label)));
  const otherKey = el("input", { type: "text", hidden: true, placeholder: "e.g. client.timeout_s", "aria-label": "Other key" });
  const values = el("input", { type: "text", "aria-label": "Values" });
  const target = el("input", { type: "number", step: "0.1", min: 0, value: 5, "aria-label": "Target p99 seconds" });
  const faultCount = (scenario.faults || []).length;
  const keepFaults = el("input", { type: "checkbox", checked: true, "aria-label": "Keep the scheduled faults" });
  const faultsLabel = el("label", { class: "inline", hidden: !faultCount }, keepFaults, ` keep the ${faultCount} scheduled fault${faultCount === 1 ? "" : "s"}`);
  const start = el("button", { type: "button", class: "primary" }, "Run sweep");
  const progress = el("progress", { class: "progress", max: 1, value: 0, hidden: true, "aria-label": "Sweep progress" });
  const status = el("p", { class: "status-line", role: "status" });
  const chart = el("div", { class: "chart", hidden: true, "data-chart": "sweep" });
  let timer = null;

  // A key's default values, as valid with the faults kept or dropped; values typed by
  // the user stay until another key is chosen.
  let typed = false;
  const defaults = () => {
    const chosen = keys.find((k) => k.key === key.value);
    otherKey.hidden = key.value !== "";
    const list = chosen ? (faultCount && !keepFaults.checked ? chosen.values_without_faults : chosen.values) : [];
    values.value = list.join(", ");
  };
  values.addEventListener("input", () => { typed = true; });
  key.addEventListener("change", () => { typed = false; defaults(); });
  keepFaults.addEventListener("change", () => { if (!typed) defaults(); });
  defaults();

  function draw(sweep) {
    const p = sweep.progress || { done: 0, total: 0 };
    progress.hidden = false;
    progress.max = Math.max(1, p.total);
    progress.value = p.done;
    let text = `Sweep ${sweep.id}: ${p.done} of ${p.total} points done (${sweep.status}).`;
    if (sweep.answer && sweep.answer.text) text += ` ${sweep.answer.text}.`;
    if (sweep.reason) text += ` ${sweep.reason}`;
    status.textContent = text;
    const curve = (sweep.curve || []).filter((pt) => pt.p99_s != null || pt.ok_rate != null);
    if (curve.length) {
      chart.hidden = false;
      const x = curve.map((pt) => pt.value);
      window.Plotly.react(chart, [
        { x, y: curve.map((pt) => pt.p99_s), name: "p99 s", mode: "lines+markers" },
        { x, y: curve.map((pt) => pt.ok_rate), name: "ok rate", mode: "lines+markers", yaxis: "y2" },
        ...(sweep.target_p99_s ? [{ x: [null], y: [null], name: `target p99 ${sweep.target_p99_s} s`, mode: "lines", line: { color: "#b42318", dash: "dash" } }] : []),
      ], {
        margin: { l: 48, r: 48, t: 26, b: 36 }, font: { size: 11 },
        title: { text: `p99 and ok-rate against ${sweep.key}`, font: { size: 12 } },
        xaxis: { title: { text: sweep.key } }, yaxis: { title: { text: "p99 latency (s)" }, rangemode: "tozero" },
        shapes: sweep.target_p99_s ? [{ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: sweep.target_p99_s, y1: sweep.target_p99_s, line: { color: "#b42318", dash: "dash", width: 1.5 } }] : [],
        yaxis2: { title: { text: "ok rate (share of offered)" }, overlaying: "y", side: "right", range: [0, 1.05] },
        legend: { orientation: "h", y: -0.3 },
      }, { displaylogo: false, responsive: true });
    }
  }

  async function poll(id) {
    try {
      const sweep = await api(`/api/sweeps/${id}/`);
      draw(sweep);
      if (ctx.config.runStatuses.active.includes(sweep.status)) timer = setTimeout(() => poll(id), POLL_MS);
      else start.disabled = false;
    } catch (err) {
      status.textContent = `Could not read the sweep: ${err.message}`;
      start.disabled = false;
    }
  }

  start.addEventListener("click", async () => {
    const list = values.value.split(/[,\s]+/).filter(Boolean).map(Number);
    if (!list.length || list.some((v) => !Number.isFinite(v))) {
      status.textContent = "values: give numbers separated by commas, e.g. 3, 6, 12.";
      return;
    }
    clearTimeout(timer);
    start.disabled = true;
    status.textContent = "Starting the sweep…";
    try {
      const sweep = await api("/api/sweeps/", {
        method: "POST",
        body: {
          session: ctx.config.sessionId, key: key.value || otherKey.value.trim(), values: list,
          target_p99_s: Number(target.value) || null,
          ...(faultCount && !keepFaults.checked ? { overrides: ["faults=[]"] } : {}),
        },
      });
      draw(sweep);
      poll(sweep.id);
    } catch (err) {
      status.textContent = `Could not start the sweep: ${err.message}`;
      start.disabled = false;
    }
  });

  box.replaceChildren(
    el("p", { class: "muted" }, "Run the fleet config once per value of any key at full speed, spread over the workers, and find the smallest value that meets a p99 target."),
    el("div", { class: "run-controls" },
      el("label", {}, "Key", key, otherKey), el("label", {}, "Values", values),
      el("label", {}, "Target p99 (s)", target), el("div", { class: "row" }, start)),
    faultsLabel,
    progress, status, chart);
}

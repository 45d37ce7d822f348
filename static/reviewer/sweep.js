// Fleet-size sweeps from the break pass: one key, a list of values, run at
// full speed on the workers; progress as points done, then the curve of p99
// and ok-rate against the value and the smallest value meeting the target.

import { api, el } from "./api.js";

const POLL_MS = 1000;

export function initSweep(ctx) {
  const box = document.getElementById("sweep-panel");
  if (!box || !ctx.config.fleet) return;
  const scenario = ctx.config.fleet.scenario || {};
  const hostCount = (scenario.hosts || [])[0]?.count ?? 1;
  const key = el("select", { "aria-label": "Key to sweep" },
    el("option", { value: "hosts[0].count" }, "hosts[0].count (hosts of the first group)"),
    el("option", { value: "traffic.qps" }, "traffic.qps (offered load)"));
  const values = el("input", { type: "text", "aria-label": "Values", value: [1, 2, 4, 8, 16].map((v) => v * hostCount).join(", ") });
  const target = el("input", { type: "number", step: "0.1", min: 0, value: 5, "aria-label": "Target p99 seconds" });
  const start = el("button", { type: "button", class: "primary" }, "Run sweep");
  const progress = el("progress", { class: "progress", max: 1, value: 0, hidden: true, "aria-label": "Sweep progress" });
  const status = el("p", { class: "status-line", role: "status" });
  const chart = el("div", { class: "chart", hidden: true, "data-chart": "sweep" });
  let timer = null;

  key.addEventListener("change", () => {
    const qps = scenario.traffic?.qps ?? 1000;
    values.value = key.value === "traffic.qps"
      ? [0.25, 0.5, 1, 2, 4].map((f) => Math.round(qps * f)).join(", ")
      : [1, 2, 4, 8, 16].map((v) => v * hostCount).join(", ");
  });

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
      ], {
        margin: { l: 48, r: 48, t: 26, b: 36 }, font: { size: 11 },
        title: { text: `p99 and ok-rate against ${sweep.key}`, font: { size: 12 } },
        xaxis: { title: { text: sweep.key } }, yaxis: { title: { text: "p99 s" } },
        yaxis2: { title: { text: "ok rate" }, overlaying: "y", side: "right", range: [0, 1.05] },
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
        body: { session: ctx.config.sessionId, key: key.value, values: list, target_p99_s: Number(target.value) || null },
      });
      draw(sweep);
      poll(sweep.id);
    } catch (err) {
      status.textContent = `Could not start the sweep: ${err.message}`;
      start.disabled = false;
    }
  });

  box.replaceChildren(
    el("p", { class: "muted" }, "Run the fleet config once per value at full speed, spread over the workers, and find the smallest value that meets a p99 target."),
    el("div", { class: "run-controls" },
      el("label", {}, "Key", key), el("label", {}, "Values", values),
      el("label", {}, "Target p99 (s)", target), el("div", { class: "row" }, start)),
    progress, status, chart);
}

// One emulator run on screen: its progress, three live plotly charts, the
// placement heatmap restyled every frame, the fault buttons and the
// attach-as-evidence bar. Frames arrive on /ws/runs/<id>/?after=N.

import { api, el, fill, wsUrl } from "../lib/api.js";
import { config } from "../lib/config.js";
import { changedKeysText, ChangeControls } from "./breakpass.js";
import { BASE_LAYOUT, decorations, KV_LEGEND, kvHeatmapTrace, TimeAxisGroup, timeAxis, valueAxes } from "../lib/charts.js";
import { keepChartsFitted } from "../lib/fit.js";
import { MechanismCharts, parseScaleEvent } from "./mechanisms.js";
import { heatmapTrace, HEATMAP_LEGEND, unitGrid } from "./placement.js";

const MAX_POINTS = 4000;
// A series is noted as stopped after this many frames (and at least this many seconds) without a completion.
const STOP_FRAMES = 5;
const STOP_MIN_S = 5;
const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

// The charts and the frame metrics each draws come from the server:
// [{key, title, per_model, markers, scale, metrics: [{key, label, dash, continuous}]}].
const CHARTS = config.runCharts;
const { active: ACTIVE, final: FINAL } = config.runStatuses;
const { QUEUED, RUNNING, DONE } = config.runStatus;
const QUEUE_POLL_MS = 2000;

/** The lines a chart draws: one per model and metric (per_model), or one per metric
 * summed over the models. ``models`` are [name, index in the frame] pairs; a metric
 * marked ``continuous`` is drawn only for the models in ``continuousModels``. */
function chartSeries(chart, models, continuousModels) {
  const drawn = (metric, m) => !metric.continuous || continuousModels.has(m);
  const many = models.length > 1;
  if (!chart.per_model) {
    return chart.metrics
      .map((metric) => ({ metric, name: metric.label, models: models.filter(([m]) => drawn(metric, m)) }))
      .filter((line) => line.models.length);
  }
  return models.flatMap(([m, mi]) => chart.metrics.filter((metric) => drawn(metric, m))
    .map((metric) => ({ metric, name: many ? `${m} ${metric.label}` : metric.label, models: [[m, mi]] })));
}

/** Empty plotly traces for a chart's lines. A frame without a value is a gap in the
 * line, never bridged: no trend is drawn where nothing was measured. */
function chartTraces(chart) {
  return chart.series.map(({ metric, name }) => ({
    x: [], y: [], name, mode: chart.markers ? "lines+markers" : "lines", connectgaps: false,
    ...(chart.markers ? { marker: { size: 3 } } : {}),
    ...(metric.dash ? { line: { dash: metric.dash } } : {}),
    ...(metric.y2 ? { yaxis: "y2" } : {}),
  }));
}

/** The new points of each of a chart's lines, in chartSeries' order, in the chart's
 * unit (``scale`` times the frame's). A metric the run's worker model does not
 * report is a gap, not an error. A log axis shows no zero: a frame without that
 * outcome is a gap there. */
function chartColumns(chart, frames) {
  const scale = chart.scale || 1;
  const scaled = (v) => (v == null ? null : v * scale);
  const positive = (v) => (chart.log && !(v > 0) ? null : v);
  return chart.series.map(({ metric, models }) => frames.map((f) => {
    const values = f.m[metric.key] || [];
    if (chart.per_model) return scaled(values[models[0][1]] ?? null);
    return positive(scaled(sum(models.map(([, mi]) => values[mi]))));
  }));
}

function sum(values) {
  return values.reduce((a, b) => a + (b || 0), 0);
}

export class RunView {
  /** ``timeGroup``: the time axis this run's charts share (with a compared run's). */
  constructor(ctx, { label, timeGroup = null }) {
    this.ctx = ctx;
    this.label = label;
    this.timeGroup = timeGroup || new TimeAxisGroup();
    this.runId = null;
    this.socket = null;
    this.lastI = -1;
    this.queue = [];
    this.layout = null;
    this.run = null;
    // The run view beside this one in compare mode (a function returning it, or null).
    this.partner = null;
    this.closed = true;
    this.node = this.build();
    keepChartsFitted(this.node);
  }

  build() {
    const c = this.ctx.config;
    const scenario = c.fleet ? c.fleet.scenario : {};
    this.title = el("span", { class: "title" }, `${this.label}: no run yet`);
    this.statusBadge = el("span", { class: "badge" }, "idle");
    this.progress = el("progress", { class: "progress", max: 1, value: 0, "aria-label": `${this.label} simulated time` });
    this.progressText = el("span", { class: "muted" }, "");
    this.speed = el("select", { "aria-label": `${this.label} speed` },
      config.speeds.map((s) => el("option", { value: s, selected: s === "10" }, s === "max" ? "as fast as possible" : `${s}× real time`)));
    this.seed = el("input", { type: "number", min: 0, value: scenario.seed ?? 1, "aria-label": `${this.label} seed` });
    this.changes = new ChangeControls(this.label, c.fleet ? c.fleet.breakControls : null);
    this.overrides = el("input", { type: "text", placeholder: "worker.kv_cache_tokens=100000", "aria-label": `${this.label} overrides` });
    this.changed = el("span", { class: "changed-keys muted" }, "");
    this.queuePlace = el("span", { class: "queue-place muted", hidden: true }, "");
    this.startButton = el("button", { type: "button", class: "primary", onclick: () => this.start() }, "Start run");
    this.cancelButton = el("button", { type: "button", disabled: true, onclick: () => this.cancel() }, "Cancel");
    this.message = el("p", { class: "status-line", role: "status" });

    this.charts = CHARTS.map((chart) => ({ ...chart, div: el("div", { class: "chart", "data-chart": chart.key }) }));
    this.heatmapDiv = el("div", { class: "heatmap", "data-chart": "heatmap" });
    this.kvDiv = el("div", { class: "heatmap kv-heatmap", "data-chart": "kv-heatmap", hidden: true });
    this.kvLegend = el("p", { class: "muted rank-help", hidden: true }, KV_LEGEND);
    this.stopNote = el("p", { class: "stop-note", hidden: true, role: "note" });
    this.faults = el("div", { class: "fault-buttons", role: "group", "aria-label": `${this.label} faults` });
    this.events = el("div", { class: "run-events", "aria-live": "polite" });
    this.summary = el("div", { class: "summary" });

    this.metric = el("select", { "aria-label": "Metric" },
      CHARTS.flatMap((chart) => chart.metrics.map((m) => el("option", { value: m.key }, m.key))));
    this.mechanisms = new MechanismCharts(this.label, this.metric, this.timeGroup);
    this.target = el("select", { "aria-label": "Finding to attach to" });
    this.attachButton = el("button", { type: "button", disabled: true, onclick: () => this.attach() }, "Attach as evidence");
    this.evidenceBar = el("div", { class: "evidence-bar row" },
      el("span", {}, "Visible window →"), this.metric, this.target, this.attachButton);

    return el("section", { class: "run-view", "aria-label": this.label },
      el("div", { class: "run-head" }, this.title, this.statusBadge, this.queuePlace),
      this.changed,
      this.changes.node,
      el("div", { class: "run-controls" },
        el("label", {}, "Speed", this.speed),
        el("label", {}, "Seed", this.seed),
        el("label", {}, "More overrides", this.overrides),
        el("div", { class: "row" }, this.startButton, this.cancelButton)),
      this.message,
      // Hidden until a run's layout arrives, so an idle panel stays compact.
      this.body = el("div", { class: "run-body", hidden: true },
        el("div", { class: "row" }, this.progress, this.progressText),
        this.faults,
        this.stopNote,
        this.charts.map((chart) => chart.div),
        el("div", { class: "heatmaps" }, this.heatmapDiv, this.kvDiv),
        el("p", { class: "muted rank-help" }, HEATMAP_LEGEND),
        this.kvLegend,
        this.mechanisms.node,
        this.events,
        this.evidenceBar,
        this.summary));
  }

  say(text) { this.message.textContent = text; }

  async start() {
    const typed = this.overrides.value.split(/[;\n]/).map((s) => s.trim()).filter(Boolean);
    const overrides = [...this.changes.overrides(), ...typed];
    const speed = this.speed.value === "max" ? "max" : Number(this.speed.value);
    this.startButton.disabled = true;
    this.say("Starting…");
    try {
      const run = await api(this.ctx.config.urls.runs, {
        method: "POST",
        body: { session: this.ctx.config.sessionId, seed: Number(this.seed.value), speed, overrides },
      });
      this.open(run.id);
      this.say(`Run ${run.id} queued.`);
    } catch (err) {
      this.say(`Could not start: ${err.message}`);
      this.startButton.disabled = false;
    }
  }

  async cancel() {
    if (this.runId === null) return;
    try {
      await api(`${fill(this.ctx.config.urls.run, this.runId)}cancel/`, { method: "POST", body: {} });
      this.say("Cancelling…");
    } catch (err) {
      this.say(`Could not cancel: ${err.message}`);
    }
  }

  /** Follow a run (new or old) from its first frame. */
  open(runId) {
    this.closeSocket();
    this.runId = runId;
    this.lastI = -1;
    this.layout = null;
    this.queue = [];
    this.frameCount = 0;
    clearTimeout(this.queueTimer);
    this.queueTimer = null;
    this.showQueuePlace(null);
    this.markers = [];
    this.lastOkT = null;
    this.stop = null;
    this.gaps = [];
    this.stopNote.hidden = true;
    this.events.replaceChildren();
    this.summary.replaceChildren();
    this.mechanisms.reset();
    this.title.textContent = `${this.label}: run ${runId}`;
    this.connect();
  }

  closeSocket() {
    this.closed = true;
    if (this.socket) this.socket.close();
    this.socket = null;
  }

  connect() {
    this.closed = false;
    const url = wsUrl(`${fill(this.ctx.config.urls.wsRun, this.runId)}?after=${this.lastI}`);
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.addEventListener("message", (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      this.onMessage(msg);
    });
    socket.addEventListener("close", (event) => {
      if (socket !== this.socket || this.closed) return;
      if (event.code >= 4400 && event.code < 4500) {
        this.say("This account cannot watch the run.");
        return;
      }
      if (this.run && FINAL.includes(this.run.status)) return;
      // Resume where we were: the server sends the frames after lastI.
      setTimeout(() => { if (socket === this.socket) this.connect(); }, 1000);
    });
  }

  onMessage(msg) {
    if (msg.type === "layout") {
      this.run = msg.run;
      this.changed.textContent = changedKeysText(msg.run.overrides);
      this.node.dataset.overrides = (msg.run.overrides || []).join("; ");
      if (!this.layout) this.setup(msg.layout);
      this.setStatus(msg.run.status);
    } else if (msg.type === "frame") {
      if (msg.frame.i <= this.lastI) return; // never twice
      this.lastI = msg.frame.i;
      this.queue.push(msg.frame);
      if (!this.pendingDraw) {
        this.pendingDraw = true;
        requestAnimationFrame(() => this.flush());
      }
    } else if (msg.type === "status") {
      this.setStatus(msg.status, msg.reason);
    } else if (msg.type === "summary") {
      this.showSummary(msg.summary, msg.shares);
    }
  }

  /** While the run waits for a worker, its place in the queue, read every few seconds. */
  showQueuePlace(place) {
    this.queuePlace.hidden = !place;
    this.queuePlace.textContent = place ? `place ${place} in the queue for a worker` : "";
    this.node.dataset.queuePlace = place ? String(place) : "";
  }

  async pollQueue() {
    clearTimeout(this.queueTimer);
    if (this.runId === null || !this.run || this.run.status !== QUEUED) { this.showQueuePlace(null); return; }
    try {
      const run = await api(fill(this.ctx.config.urls.run, this.runId));
      if (run.id !== this.runId) return;
      this.showQueuePlace(run.status === QUEUED ? run.queue_position : null);
      if (run.status !== QUEUED) return;
    } catch (err) {
      this.showQueuePlace(null);
    }
    this.queueTimer = setTimeout(() => this.pollQueue(), QUEUE_POLL_MS);
  }

  setStatus(status, reason = null) {
    const wasQueued = this.run && this.run.status === QUEUED && this.queueTimer;
    if (this.run) this.run.status = status;
    if (status === QUEUED && !wasQueued) {
      this.showQueuePlace(this.run && this.run.queue_position);
      this.queueTimer = setTimeout(() => this.pollQueue(), QUEUE_POLL_MS);
    } else if (status !== QUEUED) {
      clearTimeout(this.queueTimer);
      this.queueTimer = null;
      this.showQueuePlace(null);
    }
    this.statusBadge.textContent = status;
    this.statusBadge.className = `badge status-${status}`;
    const live = ACTIVE.includes(status);
    this.cancelButton.disabled = !live;
    this.startButton.disabled = live;
    for (const b of this.faults.querySelectorAll("button")) b.disabled = status !== RUNNING;
    if (reason) this.say(`${status}: ${reason}`);
    else if (status === RUNNING) this.say("Running. Faults apply at the run's current simulated time.");
    else if (status === DONE) this.say("Done.");
    this.node.dataset.status = status;
  }

  setup(layout) {
    this.layout = layout;
    this.body.hidden = false;
    const models = layout.models;
    this.facts = layout.facts || { batching: {}, slo: {}, faults: [], sample_s: 1 };
    const indexed = models.map((m, i) => [m, i]);
    const continuous = indexed.filter(([m]) => (this.facts.batching || {})[m] === "continuous");
    const statics = indexed.filter(([m]) => (this.facts.batching || {})[m] !== "continuous");
    const continuousModels = new Set(continuous.map(([m]) => m));
    // Every chart shows the time range the group shows; a finding's evidence opens the run zoomed to its window.
    this.timeGroup.remove(this, this.charts.map((c) => c.div));
    if (this.pendingWindow) this.timeGroup.window = this.pendingWindow;
    this.pendingWindow = null;
    this.timeGroup.setDuration(this, this.run && this.run.duration_s);
    const xaxis = timeAxis(this.run && this.run.duration_s, this.timeGroup.range());
    const zoomed = Boolean(this.timeGroup.window);
    for (const chart of this.charts) {
      chart.models = chart.continuous ? continuous : chart.static ? statics : indexed;
      chart.series = chartSeries(chart, chart.models, continuousModels);
      chart.div.hidden = chart.series.length === 0;
      if (chart.div.hidden) continue;
      const layoutFor = {
        ...BASE_LAYOUT, ...valueAxes(chart), xaxis, height: 240,
        title: { text: chart.title, font: { size: 12 } },
        ...decorations(chart, { slo: this.facts.slo || {} }),
      };
      window.Plotly.newPlot(chart.div, chartTraces(chart), layoutFor, CONFIG);
      this.timeGroup.attach(chart.div);
      const limit = chart.slo ? (this.facts.slo || {})[chart.slo] : null;
      if (limit != null) chart.div.dataset.slo = String(limit);
      if (zoomed) chart.div.dataset.zoomed = "1";
      else delete chart.div.dataset.zoomed;
    }
    this.grid = unitGrid(layout);
    // Both heatmaps' places are set before either is drawn, so each takes its own width.
    this.kvDiv.hidden = continuous.length === 0;
    this.kvLegend.hidden = this.kvDiv.hidden;
    window.Plotly.newPlot(this.heatmapDiv, [heatmapTrace(this.grid, null)],
      { margin: { l: 56, r: 8, t: 26, b: 36 }, title: { text: "Hosts × units: busy and backlog", font: { size: 12 } }, yaxis: { autorange: "reversed" }, xaxis: { title: { text: "unit", font: { size: 10 }, standoff: 0 } }, font: { size: 11 } },
      { ...CONFIG, displayModeBar: false });
    this.mechanisms.setup(layout, xaxis);
    if (!this.kvDiv.hidden) {
      window.Plotly.newPlot(this.kvDiv, [kvHeatmapTrace(this.grid, null)],
        { margin: { l: 56, r: 8, t: 26, b: 36 }, title: { text: "Hosts × units: KV cache in use", font: { size: 12 } }, yaxis: { autorange: "reversed" }, xaxis: { title: { text: "unit", font: { size: 10 }, standoff: 0 } }, font: { size: 11 } },
        { ...CONFIG, displayModeBar: false });
    }
    this.buildFaultButtons(layout);
    this.fillTargets();
    this.attachButton.disabled = false;
  }

  /** The charts drawn for this run (token charts only for continuous batching). */
  shownCharts() {
    return this.charts.filter((chart) => !chart.div.hidden && chart.series);
  }

  /** Redraw every chart's SLO line, event markers and stop note. */
  decorate() {
    const P = window.Plotly;
    const marks = this.markers.map((m) => m.t.toFixed(1)).join(",");
    for (const chart of this.shownCharts()) {
      P.relayout(chart.div, decorations(chart, { slo: this.facts.slo || {}, markers: this.markers, stop: this.stop, gaps: this.gaps }));
      chart.div.dataset.markers = marks;
    }
  }

  /** An event seen in the frame ending at ``t``, as a marker: a scheduled fault at its
   * own time, a fault injected from the page, a scale event, or another event, at the
   * frame's end. */
  eventMarker(label, t) {
    const sample = this.facts.sample_s || 1;
    const scheduled = (this.facts.faults || []).find((f) => f.command === label && f.at_s <= t + 1e-9 && f.at_s > t - sample - 1e-9);
    if (scheduled) return { t: scheduled.at_s, label, kind: "scheduled" };
    if (parseScaleEvent(label)) return { t, label, kind: "scale" };
    const action = label.split(" ")[0];
    return { t, label, kind: action === "kill" || action === "restore" ? "injected" : "other" };
  }

  /** Notes where completions stop: "no request completed since 67 s" while it lasts,
   * "no request completed from 67 s to 261 s" once requests complete again. */
  updateStop(frames) {
    const least = Math.max(STOP_MIN_S, STOP_FRAMES * (this.facts.sample_s || 1));
    let gapsChanged = false;
    for (const f of frames) {
      if (sum(f.m.ok || []) <= 0) continue;
      const from = this.lastOkT ?? 0;
      if (f.t_s - from > least) { this.gaps.push({ from, to: f.t_s }); gapsChanged = true; }
      this.lastOkT = f.t_s;
    }
    const t = frames[frames.length - 1].t_s;
    const since = this.lastOkT ?? 0;
    const quiet = t - since >= least;
    const text = !quiet ? null : this.lastOkT == null ? "no request completed yet" : `no request completed since ${since.toFixed(0)} s`;
    const changed = gapsChanged || (this.stop && this.stop.text) !== text;
    this.stop = text ? { t: since, text } : null;
    this.stopNote.hidden = !text;
    this.stopNote.textContent = text ? `${text[0].toUpperCase()}${text.slice(1)} (simulated time ${t.toFixed(0)} s).` : "";
    return changed;
  }

  buildFaultButtons(layout) {
    const buttons = [];
    const button = (command, label) => el("button", {
      type: "button", class: command.startsWith("restore") ? "restore" : "", disabled: true,
      dataset: { command }, onclick: () => this.inject(command),
    }, label);
    for (const m of layout.models) {
      buttons.push(button(`kill dispatcher:${m}`, `Kill ${m} dispatcher`));
      buttons.push(button(`restore dispatcher:${m}`, `Restore ${m} dispatcher`));
    }
    for (const h of layout.hosts) {
      buttons.push(button(`kill host:${h.index}`, `Kill host ${h.index}`));
      buttons.push(button(`restore host:${h.index}`, `Restore host ${h.index}`));
    }
    // Workers are named per model in layout order: worker:big:0, worker:big:1 ...
    const perModel = {};
    const workerSelect = el("select", { "aria-label": "Worker" });
    layout.workers.model.forEach((mi, w) => {
      const m = layout.models[mi];
      perModel[m] = (perModel[m] ?? -1) + 1;
      workerSelect.append(el("option", { value: `worker:${m}:${perModel[m]}` }, `${m} worker ${perModel[m]} (host ${layout.workers.host[w]})`));
    });
    const killWorker = el("button", { type: "button", disabled: true, onclick: () => this.inject(`kill ${workerSelect.value}`) }, "Kill worker");
    const restoreWorker = el("button", { type: "button", class: "restore", disabled: true, onclick: () => this.inject(`restore ${workerSelect.value}`) }, "Restore worker");
    this.faults.replaceChildren(...buttons, workerSelect, killWorker, restoreWorker);
    workerSelect.disabled = false;
  }

  async inject(command) {
    const [action, target] = command.split(" ");
    try {
      await api(`${fill(this.ctx.config.urls.run, this.runId)}faults/`, { method: "POST", body: { [action]: target } });
      this.say(`Sent "${command}"; it applies at the next frame.`);
    } catch (err) {
      this.say(`Could not ${command}: ${err.message}`);
    }
  }

  flush() {
    this.pendingDraw = false;
    const frames = this.queue.splice(0);
    if (!frames.length || !this.layout) return;
    const P = window.Plotly;
    const x = frames.map((f) => f.t_s);
    for (const chart of this.shownCharts()) {
      const y = chartColumns(chart, frames);
      P.extendTraces(chart.div, { x: y.map(() => x), y }, y.map((_, i) => i), MAX_POINTS);
    }
    const last = frames[frames.length - 1];
    // An autoscaled fleet places and parks workers as it runs: its frames say where each one is.
    if (last.w.host && last.w.first_unit) {
      this.grid = unitGrid({ ...this.layout, workers: { ...this.layout.workers, host: last.w.host, first_unit: last.w.first_unit } });
    }
    P.restyle(this.heatmapDiv, heatmapTrace(this.grid, last, { restyle: true }), [0]);
    if (!this.kvDiv.hidden) P.restyle(this.kvDiv, kvHeatmapTrace(this.grid, last, { restyle: true }), [0]);
    this.heatmapDiv.dataset.frame = String(last.i);
    this.heatmapDiv.dataset.deadHosts = String(last.h.alive.filter((a) => !a).length);
    this.heatmapDiv.dataset.busy = String(last.w.state.filter((s) => s === 1).length);
    const duration = (this.run && this.run.duration_s) || 1;
    this.progress.max = duration;
    this.progress.value = last.t_s;
    this.progressText.textContent = `${last.t_s.toFixed(0)} / ${duration.toFixed(0)} s simulated${last.behind ? " (behind its speed)" : ""}`;
    this.node.dataset.frames = String(last.i + 1);
    this.mechanisms.add(frames);
    let marked = false;
    for (const f of frames) {
      for (const e of f.events || []) {
        this.events.prepend(el("div", {}, `t=${f.t_s.toFixed(0)} s: ${e}`));
        this.markers.push(this.eventMarker(e, f.t_s));
        marked = true;
      }
    }
    if (this.updateStop(frames) || marked) this.decorate();
    this.onDrawn();
  }

  /** Fit every chart to its box again (after the panel changed width: a second run opened or closed). */
  resize() {
    if (!this.layout) return;
    for (const div of [...this.shownCharts().map((c) => c.div), this.heatmapDiv, ...(this.kvDiv.hidden ? [] : [this.kvDiv]),
      ...this.mechanisms.shownDivs()]) {
      window.Plotly.Plots.resize(div);
    }
  }

  /** Called after each drawing (the compare view keeps two runs' axes shared). */
  onDrawn() {}

  /** The run's totals: each outcome's count and share of what was offered, the
   * requests still in the system at the end included, so the shares add up to 100%
   * (``shares`` from the server), then the latency percentiles. One row per figure:
   * it fits the narrow column of a compared run. */
  showSummary(s, shares) {
    if (!s) return;
    this.mechanisms.summary(s);
    const lat = s.latency_s || {};
    const fmt = (v) => (v == null ? "–" : `${Number(v).toFixed(2)} s`);
    const count = (n) => Number(n).toLocaleString("en-US");
    const row = (head, n, share, cls = "") => el("tr", { class: cls },
      el("th", { scope: "row" }, head), el("td", { class: "num" }, n), el("td", { class: "num share" }, share));
    const offeredKey = config.requestCounts[0];
    this.summary.replaceChildren(el("table", { class: "run-summary" },
      el("caption", {}, "Requests of the run"),
      el("thead", {}, el("tr", {}, el("th", {}, "outcome"), el("th", { class: "num" }, "requests"), el("th", { class: "num" }, "share of offered"))),
      el("tbody", {},
        row(offeredKey, count(s[offeredKey] || 0), "", "total"),
        ...(shares || []).flatMap((o) => [
          row(o.label, count(o.count), `${o.percent.toFixed(1)}%`),
          // Why they were shed, one indented row per reason.
          ...(o.reasons || []).map((r) => row(`  ${r.label}`, count(r.count), "", "reason")),
        ]),
        row("p50 latency", fmt(lat.p50), ""),
        row("p99 latency", fmt(lat.p99), ""))));
  }

  /** Findings the viewer may change (their own), offered as evidence targets. */
  fillTargets() {
    const mine = this.ctx.store.all().filter((f) => f.author === this.ctx.config.user.username);
    const keep = this.target.value;
    this.target.replaceChildren(el("option", { value: "" }, "a new finding"),
      ...mine.map((f) => el("option", { value: f.id }, f.title.slice(0, 60))));
    if (keep && [...this.target.options].some((o) => o.value === keep)) this.target.value = keep;
  }

  /** The time window the reader has zoomed the chart holding the chosen metric to. */
  visibleWindow() {
    const chart = this.charts.find((c) => c.metrics.some((m) => m.key === this.metric.value))
      || this.mechanisms.chartOf(this.metric.value);
    const range = chart.div.layout && chart.div.layout.xaxis && chart.div.layout.xaxis.range;
    if (range && range.length === 2) return [Math.max(0, Number(range[0])), Number(range[1])];
    const xs = chart.div.data && chart.div.data[0] ? chart.div.data[0].x : [];
    return [xs.length ? xs[0] : 0, xs.length ? xs[xs.length - 1] : 0];
  }

  async attach() {
    if (this.runId === null) return;
    const [from, to] = this.visibleWindow();
    const evidence = {
      evidence_run_id: this.runId,
      evidence_t_from_s: Math.round(from * 10) / 10,
      evidence_t_to_s: Math.round(Math.max(from, to) * 10) / 10,
      evidence_metric: this.metric.value,
      // In compare mode the evidence is the comparison: the same window of the run beside.
      evidence_compare_run_id: null,
    };
    const other = this.partner ? this.partner() : null;
    let note = `run ${this.runId}`;
    if (other && other.runId !== null && other.runId !== this.runId) {
      evidence.evidence_compare_run_id = other.runId;
      const keys = (view) => changedKeysText(view.run ? view.run.overrides : []);
      note = `run ${this.runId} (${keys(this)}) against run ${other.runId} (${keys(other)})`;
    }
    const id = this.target.value;
    if (!id) {
      this.ctx.openFindingForm({ pass: config.pass.BREAK, evidence: { ...evidence, note } });
      return;
    }
    const f = this.ctx.store.get(id);
    try {
      const updated = await api(fill(this.ctx.config.urls.finding, id), { method: "PATCH", body: { ...evidence, version: f.version } });
      this.ctx.updateFinding(updated);
      this.say(`Attached ${note}, ${evidence.evidence_metric}, ${evidence.evidence_t_from_s}–${evidence.evidence_t_to_s} s to "${updated.title}".`);
    } catch (err) {
      if (err.status === 409) {
        // Someone changed the finding since this page read it: take theirs, ask again.
        this.ctx.updateFinding(await api(fill(this.ctx.config.urls.finding, id)));
        this.say("The finding changed meanwhile; it is up to date now, attach again.");
      } else {
        this.say(`Could not attach: ${err.message}`);
      }
    }
  }

}

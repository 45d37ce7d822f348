// The serving mechanisms of one run, under its other charts: prefix caching (hit
// rate with the workers' spread, prefill tokens saved), disaggregated prefill and
// decode pools (TTFT per pool, KV handoff queues) and autoscaling (workers by state,
// stacked, with the scale events as markers and a table). Which metrics each chart
// draws comes from the server (config.mechanismCharts); a chart appears only once
// the run's frames carry a value for it, so a run without a mechanism shows nothing.

import { el } from "../lib/api.js";
import { config } from "../lib/config.js";
import { plannedLooks, plannerTraces } from "./planner_looks.js";

const VOCAB = config.mechanismCharts;
const SCALE_EVENT = new RegExp(VOCAB.scaleEventPattern);
const MAX_POINTS = 4000;
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
const BAND = "rgba(59, 125, 216, 0.18)";
const PLANNER = VOCAB.plannerChart;


/** The autoscaler's event from a frame's event line, or null for any other line. */
export function parseScaleEvent(line) {
  const m = SCALE_EVENT.exec(line);
  if (!m) return null;
  return {
    direction: m[1], model: m[2],
    worker: m[3] === undefined ? null : Number(m[3]),
    host: m[4] === undefined ? null : Number(m[4]),
    reason: m[5],
  };
}

/** The number at ``path`` in ``obj``, or null. */
function pick(obj, path) {
  let v = obj;
  for (const key of path) v = v != null && typeof v === "object" ? v[key] : null;
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function fmtTotal(total, v) {
  const x = v * (total.scale || 1);
  const text = total.digits != null ? x.toFixed(total.digits) : Math.round(x).toLocaleString("en-US");
  if (!total.unit) return text;
  return total.unit === "%" ? `${text}%` : `${text} ${total.unit}`;
}

function fmtTime(t) {
  return Number.isInteger(t) ? String(t) : t.toFixed(1);
}

export class MechanismCharts {
  /** ``metricSelect``: the evidence bar's metric choice, offered each chart's metrics once it shows;
   * ``timeGroup``: the time axis shared with the run's other charts (charts.js TimeAxisGroup). */
  constructor(label, metricSelect = null, timeGroup = null) {
    this.label = label;
    this.timeGroup = timeGroup;
    this.metricSelect = metricSelect;
    this.charts = VOCAB.charts.map((spec) => ({
      spec, div: el("div", { class: "chart mech-chart", "data-chart": spec.key, hidden: true }),
    }));
    // Every frame metric a chart draws (the mechanisms' own and the client's TTFT beside them).
    this.keys = [...new Set(VOCAB.charts.flatMap((c) => c.metrics.map((m) => m.key)))];
    this.eventRows = el("tbody");
    this.eventNote = el("span", { class: "muted" });
    this.eventBlock = el("div", { class: "scale-events", hidden: true },
      el("table", { "aria-label": `${label} scale events` },
        el("caption", {}, "Scale events ", this.eventNote),
        el("thead", {}, el("tr", {}, ["time (s)", "event", "reason"].map((h) => el("th", {}, h)))),
        this.eventRows));
    // One section per mechanism, in the server's order, each hidden until one of its charts shows.
    this.sections = [];
    for (const chart of this.charts) {
      let section = this.sections.find((s) => s.title === chart.spec.mechanism);
      if (!section) {
        const totals = el("p", { class: "mech-totals", hidden: true });
        section = { title: chart.spec.mechanism, totals,
          node: el("div", { class: "mech-section", hidden: true }, el("h4", {}, chart.spec.mechanism), totals) };
        this.sections.push(section);
      }
      section.node.append(chart.div);
      chart.section = section;
      if (chart.spec.scale_events) section.node.append(this.eventBlock);
    }
    // The SLO planner's chart, from the summary, under the autoscaling charts.
    this.plannerDiv = el("div", { class: "chart mech-chart", "data-chart": PLANNER.key, hidden: true });
    const autoscaling = this.sections.find((s) => s.title === PLANNER.mechanism);
    if (autoscaling) autoscaling.node.append(this.plannerDiv);
    this.node = el("div", { class: "mechanisms", hidden: true }, this.sections.map((s) => s.node));
    this.reset();
  }

  /** Forget the run shown: hide everything until the next run's frames say what it has. */
  reset() {
    this.layout = null;
    this.xaxis = { ticksuffix: " s" };
    this.rows = [];
    this.sampleS = null;
    this.events = [];
    this.exactEvents = false;
    this.pending = false;
    for (const chart of this.charts) {
      chart.present = false;
      chart.div.hidden = true;
      if (window.Plotly && chart.div.data) window.Plotly.purge(chart.div);
      delete chart.div.dataset.timeGroup; // purged: its listeners are gone
    }
    for (const s of this.sections) {
      s.node.hidden = true;
      s.totals.hidden = true;
      s.totals.replaceChildren();
    }
    this.eventBlock.hidden = true;
    this.eventRows.replaceChildren();
    this.plannerDiv.hidden = true;
    if (window.Plotly && this.plannerDiv.data) window.Plotly.purge(this.plannerDiv);
    if (this.metricSelect) for (const o of this.metricSelect.querySelectorAll("option[data-mechanism]")) o.remove();
    this.node.hidden = true;
    this.node.dataset.charts = "";
  }

  /** A run's layout arrived; ``xaxis`` is the other charts' (a finding's window, if any). */
  setup(layout, xaxis) {
    this.reset();
    this.layout = layout;
    this.xaxis = xaxis;
  }

  /** New frames: keep what the mechanism charts need and redraw those with data. */
  add(frames) {
    if (!this.layout) return;
    const models = this.layout.models;
    const workerModel = this.layout.workers.model;
    for (const f of frames) {
      const row = { t: f.t_s, m: {}, spread: {} };
      for (const key of this.keys) if (f.m[key]) row.m[key] = f.m[key];
      for (const chart of this.charts) {
        const spread = chart.spec.spread;
        const perWorker = spread && f.w[spread.worker_key];
        if (!perWorker) continue;
        const scale = chart.spec.scale || 1;
        row.spread[chart.spec.key] = models.map((_, mi) => {
          const vals = perWorker.filter((v, w) => v !== null && workerModel[w] === mi);
          return vals.length ? [Math.min(...vals) * scale, Math.max(...vals) * scale] : null;
        });
      }
      this.rows.push(row);
      if (!this.sampleS && f.t_s > 0) this.sampleS = f.t_s / (f.i + 1);
      if (!this.exactEvents) {
        // A frame covers (t - sample, t]; its events happened somewhere in it.
        const from = f.i > 0 ? f.t_s - f.t_s / (f.i + 1) : 0;
        for (const line of f.events || []) {
          const e = parseScaleEvent(line);
          if (e) this.events.push({ ...e, t: f.t_s, from });
        }
      }
    }
    if (this.rows.length > MAX_POINTS) this.rows.splice(0, this.rows.length - MAX_POINTS);
    this.draw();
  }

  /** The run's summary: its scale events with their exact times replace the frames' ones. */
  summary(s) {
    if (s) this.showTotals(s);
    if (s) this.showPlanner(s);
    if (!s) return;
    // The model's autoscaler, then each pool's (its reason prefixed by the pool, as
    // the frames' log lines are), merged in time order.
    const scalers = [[s[VOCAB.scaleSummary], ""],
      ...Object.entries(s[VOCAB.poolScaleSummary] || {}).map(([pool, a]) => [a, `pool ${pool}: `])]
      .filter(([a]) => a && Array.isArray(a.events));
    if (!scalers.length) return;
    this.exactEvents = true;
    this.events = scalers.flatMap(([scale, prefix]) => scale.events.map((e) => ({
      direction: e.direction, model: scale.model,
      worker: e.worker ?? null, host: e.host != null && e.host >= 0 ? e.host : null,
      reason: `${prefix}${e.reason}`, t: e.t_s, from: e.t_s,
    }))).sort((a, b) => a.t - b.t);
    this.draw();
  }

  /** The planner's looks against its workers' capacity, for a run whose summary has them. */
  showPlanner(s) {
    const planned = plannedLooks(PLANNER, s);
    if (!planned.length || !window.Plotly) return;
    const section = this.sections.find((x) => x.title === PLANNER.mechanism);
    if (section) section.node.hidden = false;
    this.node.hidden = false;
    this.plannerDiv.hidden = false;
    const layout = this.chartLayout({ spec: { title: PLANNER.title, y_title: PLANNER.y_title } });
    window.Plotly.react(this.plannerDiv, plannerTraces(PLANNER, planned), layout, PLOT_CONFIG);
    if (this.timeGroup) this.timeGroup.attachOnce(this.plannerDiv);
    this.plannerDiv.dataset.points = String(planned.reduce((n, p) => n + p.looks[PLANNER.x].length, 0));
  }

  /** The run's totals under each mechanism whose figures the summary holds. */
  showTotals(s) {
    const models = this.layout ? this.layout.models : Object.keys(s.per_model || {});
    for (const section of this.sections) {
      const parts = [];
      const totals = VOCAB.totals.filter((t) => t.mechanism === section.title);
      // The run's own figures, then each scaled pool's, then each model's.
      const pools = Object.keys(s.pool_autoscale || {});
      const scopes = [
        ...(totals.some((t) => t.scope === "run") ? [{ kind: "run", where: s, name: "" }] : []),
        ...(totals.some((t) => t.scope === "pool")
          ? pools.map((p) => ({ kind: "pool", where: s.pool_autoscale[p], name: `pool ${p}: ` })) : []),
        ...models.map((m) => ({ kind: "model", where: (s.per_model || {})[m], name: models.length > 1 ? `${m}: ` : "" })),
      ];
      for (const scope of scopes) {
        const figures = totals
          .filter((t) => t.scope === scope.kind)
          .map((t) => [t, pick(scope.where, t.path)])
          .filter(([, v]) => v !== null)
          .map(([t, v]) => `${t.label} ${fmtTotal(t, v)}`);
        if (figures.length) parts.push(`${scope.name}${figures.join(", ")}`);
      }
      section.totals.hidden = !parts.length;
      section.totals.textContent = parts.length ? `Over the run: ${parts.join("; ")}.` : "";
    }
  }

  /** The models with a value of one of the chart's metrics in some frame. */
  modelsOf(chart) {
    const keys = chart.spec.present_keys || chart.spec.metrics.map((m) => m.key);
    return this.layout.models
      .map((name, mi) => ({ name, mi }))
      .filter(({ mi }) => this.rows.some((r) => keys.some((k) => r.m[k] && r.m[k][mi] != null)));
  }

  traces(chart, models) {
    const spec = chart.spec;
    const scale = spec.scale || 1;
    const x = this.rows.map((r) => r.t);
    const named = (model, label) => (this.layout.models.length > 1 ? `${model} ${label}` : label);
    const traces = [];
    for (const { name, mi } of models) {
      if (spec.spread) {
        const band = this.rows.map((r) => (r.spread[spec.key] ? r.spread[spec.key][mi] : null));
        const group = `${name}-spread`;
        traces.push({ x, y: band.map((b) => (b ? b[1] : null)), mode: "lines", line: { width: 0 },
          legendgroup: group, showlegend: false, hoverinfo: "skip" });
        traces.push({ x, y: band.map((b) => (b ? b[0] : null)), mode: "lines", line: { width: 0 },
          fill: "tonexty", fillcolor: BAND, legendgroup: group, name: named(name, spec.spread.label),
          hoverinfo: "skip" });
      }
      for (const metric of spec.metrics) {
        const y = this.rows.map((r) => {
          const v = r.m[metric.key] ? r.m[metric.key][mi] : null;
          return v == null ? null : v * scale;
        });
        // A sparse metric breaks where frames have no value and marks each one it has.
        const trace = metric.sparse
          ? { x, y, name: named(name, metric.label), mode: "lines+markers", marker: { size: 5 }, connectgaps: false }
          : { x, y, name: named(name, metric.label), mode: "lines", connectgaps: Boolean(spec.connect_gaps) };
        // A metric's own colour (p50 and p95 of one pool alike) when one model is drawn.
        const colour = metric.colour && models.length === 1 ? { color: metric.colour } : {};
        if (metric.dash || colour.color) trace.line = { ...colour, ...(metric.dash ? { dash: metric.dash } : {}) };
        if (metric.sparse && colour.color) trace.marker = { size: 5, ...colour };
        // A metric of sparse events (a value in few frames): a mark per frame, no line between them.
        if (metric.markers) Object.assign(trace, { mode: "markers", marker: { ...colour, size: 8 } });
        if (spec.stacked) {
          // Counts read at each frame's end: steps, not ramps between frames.
          Object.assign(trace, { stackgroup: name, line: { width: 0.5, color: metric.colour, shape: "hv" }, fillcolor: metric.colour });
        }
        traces.push(trace);
      }
    }
    if (spec.scale_events) {
      // One legend entry per direction drawn, for the markers' colours.
      const seen = [...new Set(this.events.map((e) => e.direction))];
      for (const d of seen) {
        traces.push({ x: [null], y: [null], mode: "lines", name: `scale ${d}`,
          line: { color: VOCAB.scaleColours[d] || "#868e96", dash: "dot", width: 1.5 }, hoverinfo: "skip" });
      }
      // A mark at the top of each marker line, whose hover tells the event.
      if (this.events.length) {
        traces.push({ x: this.events.map((e) => e.t), y: this.events.map(() => 1), yaxis: "y2", mode: "markers",
          marker: { symbol: "triangle-down", size: 8, color: this.events.map((e) => VOCAB.scaleColours[e.direction] || "#868e96") },
          text: this.events.map((e) => `${e.direction}${e.worker !== null ? ` worker ${e.worker}` : ""}: ${e.reason}`),
          hovertemplate: "%{text}<extra>scale</extra>", showlegend: false, cliponaxis: false });
      }
    }
    return traces;
  }

  chartLayout(chart) {
    const spec = chart.spec;
    const layout = {
      // The run's other charts' margins, so the time axes line up.
      margin: { l: 56, r: 56, t: 26, b: 34 },
      title: { text: spec.per_frame && this.sampleS ? `${spec.title} (frames of ${fmtTime(this.sampleS)} s)` : spec.title, font: { size: 12 } },
      font: { size: 11 },
      hovermode: "x unified",
      legend: { orientation: "h", y: -0.3, font: { size: 10 } },
      xaxis: { title: { text: "simulated time (s)", font: { size: 10 }, standoff: 2 }, ...this.xaxis, zeroline: false,
        ...(this.timeGroup && this.timeGroup.range() ? { range: this.timeGroup.range(), autorange: false } : {}) },
      yaxis: { title: { text: spec.y_title, font: { size: 10 } }, rangemode: "tozero",
        ...(spec.tick_suffix ? { ticksuffix: spec.tick_suffix } : {}),
        ...(spec.range ? { range: spec.range, autorange: false } : {}) },
    };
    if (spec.scale_events) {
      layout.yaxis2 = { overlaying: "y", range: [0, 1], visible: false, fixedrange: true };
      layout.shapes = this.events.map((e) => ({
        type: "line", xref: "x", yref: "paper", x0: e.t, x1: e.t, y0: 0, y1: 1,
        line: { color: VOCAB.scaleColours[e.direction] || "#868e96", width: 1.5, dash: "dot" },
      }));
    }
    return layout;
  }

  draw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (!this.layout) return;
      const shown = [];
      for (const chart of this.charts) {
        const models = this.modelsOf(chart);
        if (!models.length) continue;
        if (!chart.present) this.offerMetrics(chart);
        chart.present = true;
        chart.section.node.hidden = false;
        chart.div.hidden = false;
        this.node.hidden = false;
        window.Plotly.react(chart.div, this.traces(chart, models), this.chartLayout(chart), PLOT_CONFIG);
        if (this.timeGroup) this.timeGroup.attachOnce(chart.div);
        chart.div.dataset.points = String(this.rows.length);
        shown.push(chart.spec.key);
        if (chart.spec.scale_events) this.fillEvents();
      }
      this.node.dataset.charts = shown.join(" ");
    });
  }

  /** The divs of the charts shown, for fitting them to a changed width. */
  shownDivs() {
    return this.charts.filter((c) => c.present && c.div.data).map((c) => c.div);
  }

  /** The shown chart drawing ``metricKey`` (for the evidence bar's visible window), or undefined. */
  chartOf(metricKey) {
    return this.charts.find((c) => c.present && c.spec.metrics.some((m) => m.key === metricKey));
  }

  offerMetrics(chart) {
    if (!this.metricSelect) return;
    const have = new Set([...this.metricSelect.options].map((o) => o.value));
    for (const m of chart.spec.metrics) {
      if (have.has(m.key)) continue;
      this.metricSelect.append(el("option", { value: m.key, dataset: { mechanism: chart.spec.key } }, m.key));
    }
  }

  fillEvents() {
    this.eventBlock.hidden = false;
    this.eventNote.textContent = this.exactEvents
      ? `(${this.events.length}, exact times from the run's summary)`
      : `(${this.events.length} so far; live, each at the frame it fell in)`;
    const rows = this.events.map((e) => el("tr", { dataset: { direction: e.direction } },
      el("td", { class: "num" }, e.from < e.t ? `${fmtTime(e.from)}–${fmtTime(e.t)}` : fmtTime(e.t)),
      el("td", { class: "event" },
        el("span", { class: "scale-dir", style: `border-color: ${VOCAB.scaleColours[e.direction] || "#868e96"}` }, e.direction),
        el("span", { class: "muted" }, [e.worker !== null ? ` worker ${e.worker}` : "", e.host !== null ? ` on host ${e.host}` : ""].join(""))),
      el("td", { class: "reason" }, e.reason)));
    this.eventRows.replaceChildren(...rows);
  }
}

// @ts-check
// What a run's charts draw besides their lines: the axes with their units, the
// SLO lines, the fault and scale events as markers at their time, the note where
// a series stops, and the KV heatmap (hosts × units coloured by each worker's KV
// use). Used by runview.js and by the overlay of two compared runs.

export const CHART_HEIGHT = 240;

/** The page's plotly (a global the page loads before its modules). @returns {any} */
const plotly = () => /** @type {any} */ (window).Plotly;

// Every time chart keeps the same margins, a right-hand axis or not, so the time
// axes of a run's charts (and of two compared runs) line up to the pixel.
export const BASE_LAYOUT = {
  margin: { l: 56, r: 56, t: 28, b: 58 },
  legend: { orientation: "h", y: -0.36, font: { size: 10 } },
  font: { size: 11 },
  hovermode: "x unified",
};

/** The x axis every run chart shares: simulated time, from 0 to the run's end; a
 * vertical spike marks the time under the pointer (the crosshair). */
export function timeAxis(duration, window = null) {
  const axis = {
    title: { text: "simulated time (s)", standoff: 2, font: { size: 10 } }, ticksuffix: " s",
    showspikes: true, spikemode: "across", spikesnap: "cursor", spikethickness: 1, spikedash: "solid", spikecolor: "#6b7280",
  };
  if (window) return { ...axis, range: window, autorange: false };
  return duration ? { ...axis, range: [0, duration], autorange: false } : { ...axis, rangemode: "tozero" };
}

/** A chart's y axes from its spec: the unit as the title, log or fixed range, a second axis.
 * A log axis is ticked at powers of ten only ("1, 10, 100", never "2, 5, 1000, 2, 5"). */
export function valueAxes(chart) {
  const y = { title: { text: chart.y_title || "", font: { size: 10 } }, rangemode: "tozero" };
  if (chart.log) { y.type = "log"; y.dtick = 1; y.exponentformat = "none"; delete y.rangemode; }
  if (chart.y_range) { y.range = chart.y_range; y.autorange = false; }
  const out = { yaxis: y };
  if (chart.metrics.some((m) => m.y2)) {
    out.yaxis2 = { title: { text: chart.y2_title || "", font: { size: 10 } }, overlaying: "y", side: "right", range: [0, 1.05], showgrid: false };
  }
  return out;
}

const ACTION_COLOUR = { kill: "#b42318", restore: "#027a48", scale: "#6d28d9" };
// How each kind of event is drawn: a fault the scenario schedules, one a reviewer
// injected while the run played, the autoscaler's scale events, anything else.
export const MARKER_KINDS = {
  scheduled: { legend: "scheduled fault", dash: "dot", width: 1.5 },
  injected: { legend: "injected fault", dash: "solid", width: 2.5 },
  scale: { legend: "scale event", dash: "dashdot", width: 1.5 },
  other: { legend: "event", dash: "longdash", width: 1 },
};
// A marker's label on the chart: an event's first words ("scale up chat"); the whole line on hover.
const LABEL_WORDS = 3;

function round(v) {
  return Math.round(v * 1e9) / 1e9;
}

/** Shapes and annotations: SLO line, event markers (one legend entry per kind),
 * and the notes where completions stopped (``gaps``: finished quiet stretches,
 * ``stop``: the one still going on). */
export function decorations(chart, { slo = {}, markers = [], stop = null, gaps = [] }) {
  const shapes = [];
  const annotations = [];
  const scale = chart.scale || 1;
  const limit = chart.slo && slo[chart.slo] != null ? round(slo[chart.slo] * scale) : null;
  if (limit != null) {
    shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: limit, y1: limit,
      line: { color: "#b42318", width: 1.5, dash: "dash" }, name: "slo" });
    annotations.push({ xref: "paper", x: 0, xanchor: "left", yref: "y", y: limit, yanchor: "bottom",
      text: `SLO ${limit} ${chart.unit || "s"}`, showarrow: false, font: { size: 10, color: "#b42318" } });
  }
  const legended = new Set();
  markers.forEach((m, i) => {
    const kind = MARKER_KINDS[m.kind] || MARKER_KINDS.other;
    const colour = ACTION_COLOUR[m.label.split(" ")[0]] || "#6b7280";
    shapes.push({ type: "line", xref: "x", x0: m.t, x1: m.t, yref: "paper", y0: 0, y1: 1,
      line: { color: colour, width: kind.width, dash: kind.dash }, name: kind.legend,
      legendgroup: kind.legend, showlegend: !legended.has(kind.legend) });
    legended.add(kind.legend);
    const words = m.label.split(" ");
    annotations.push({ xref: "x", x: m.t, yref: "paper", y: 1 - 0.12 * (i % 3), xanchor: "left",
      text: words.slice(0, LABEL_WORDS).join(" "), hovertext: `${kind.legend}: ${m.label}`, showarrow: false,
      font: { size: 10, color: colour }, bgcolor: "rgba(255,255,255,0.7)" });
  });
  if (chart.stops_without_completions) {
    const note = (t, text) => annotations.push({ xref: "x", x: t, yref: "paper", y: 0.5, xanchor: "left",
      text, showarrow: false, font: { size: 10, color: "#92400e" }, bgcolor: "#fffbeb" });
    for (const g of gaps) note(g.from, `no request completed from ${g.from.toFixed(0)} s to ${g.to.toFixed(0)} s`);
    if (stop) note(stop.t, stop.text);
  }
  return { shapes, annotations };
}

/** The KV heatmap of a frame: each unit coloured by its worker's KV in use (0..1);
 * -0.1 dead, null a free unit or a worker of a statically batched model. */
export function kvHeatmapTrace(grid, frame, { restyle = false } = {}) {
  const z = [];
  const text = [];
  for (let h = 0; h < grid.hosts; h++) {
    const hostAlive = !frame || frame.h.alive[h] !== 0;
    const row = [];
    const tips = [];
    for (let u = 0; u < grid.width; u++) {
      const w = grid.cells[h][u];
      if (w === null) { row.push(null); tips.push(`host ${h} unit ${u}: free`); continue; }
      const kv = frame && frame.w.kv ? frame.w.kv[w] : null;
      const running = frame && frame.w.running ? frame.w.running[w] : null;
      if (!hostAlive || (frame && frame.w.state[w] === 2)) {
        row.push(-0.1);
        tips.push(`host ${h} unit ${u}: ${grid.names[w]}, dead`);
      } else if (kv == null) {
        row.push(null);
        tips.push(`host ${h} unit ${u}: ${grid.names[w]}, no KV cache (static batching)`);
      } else {
        row.push(kv);
        tips.push(`host ${h} unit ${u}: ${grid.names[w]}, KV ${(100 * kv).toFixed(0)}% in use, ${running ?? 0} running`);
      }
    }
    z.push(row);
    text.push(tips);
  }
  if (restyle) return { z: [z], text: [text] };
  const dead = 0.1 / 1.1;
  return {
    type: "heatmap", z, text, hoverinfo: "text",
    x: Array.from({ length: grid.width }, (_, u) => u),
    y: Array.from({ length: grid.hosts }, (_, h) => `host ${h}`),
    zmin: -0.1, zmax: 1, xgap: 2, ygap: 2,
    colorscale: [[0, "#7f1d1d"], [dead * 0.999, "#7f1d1d"], [dead, "#f0f9ff"], [0.6, "#60a5fa"], [0.85, "#f59e0b"], [1, "#b91c1c"]],
    colorbar: { title: { text: "KV in use", side: "right", font: { size: 10 } }, tickvals: [0, 0.5, 1], ticktext: ["0%", "50%", "100%"], thickness: 10, len: 0.9 },
  };
}

export const KV_LEGEND = "KV heatmap: each unit coloured by its worker's KV cache in use, pale empty to red full; dark red dead.";

/** The extent of a chart's y values, for shared axes between compared runs. */
export function yExtent(div, axis = "y") {
  let lo = Infinity;
  let hi = -Infinity;
  for (const t of div.data || []) {
    if ((t.yaxis || "y") !== axis) continue;
    for (const v of t.y || []) {
      if (v == null || !Number.isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return hi >= lo ? [lo, hi] : null;
}

/** The extent of a chart's shapes along y (the SLO line must stay in view). */
export function shapeTop(div) {
  const ys = ((div.layout && div.layout.shapes) || []).filter((s) => s.yref === "y").map((s) => s.y0);
  return ys.length ? Math.max(...ys) : -Infinity;
}

/** One time axis for many plotly charts (a run's, and a compared run's): a zoom or
 * pan on any of them (plotly's own ``plotly_relayout``) is applied to all with
 * ``Plotly.relayout``; a double-click shows the whole run on all; hovering one
 * marks the same time on every other (``Plotly.Fx.hover``), a crosshair. */
export class TimeAxisGroup {
  constructor() {
    this.divs = new Set();
    this.window = null; // [from, to] once zoomed; null: the whole run
    this.durations = new Map(); // owner -> its run's duration
    this.hovering = false;
  }

  /** The range every member shows now. */
  range() {
    if (this.window) return this.window;
    const longest = Math.max(0, ...this.durations.values());
    return longest ? [0, longest] : null;
  }

  /** ``owner``'s run lasts ``duration`` s: the whole-run range is the longest member's. */
  setDuration(owner, duration) {
    const before = this.range();
    if (duration) this.durations.set(owner, duration); else this.durations.delete(owner);
    const now = this.range();
    if (!this.window && now && (!before || before[1] !== now[1])) this.apply(now, null);
  }

  /** ``owner`` left (a compared run closed). */
  remove(owner, divs) {
    for (const d of divs) this.divs.delete(d);
    this.durations.delete(owner);
  }

  /** Follow ``div`` (after each ``Plotly.newPlot``, which drops its listeners). */
  attach(div) {
    this.divs.add(div);
    div.on("plotly_relayout", (ev) => this.relayouted(div, ev));
    div.on("plotly_hover", (ev) => this.hovered(div, ev));
    div.on("plotly_unhover", () => this.unhovered(div));
  }

  /** A member's chart drawn by ``Plotly.react`` keeps its listeners: attach it once. */
  attachOnce(div) {
    if (div.dataset.timeGroup) return;
    div.dataset.timeGroup = "1";
    this.attach(div);
  }

  relayouted(div, ev) {
    let range = null;
    if ("xaxis.range[0]" in ev && "xaxis.range[1]" in ev) range = [Number(ev["xaxis.range[0]"]), Number(ev["xaxis.range[1]"])];
    else if (Array.isArray(ev["xaxis.range"])) range = ev["xaxis.range"].map(Number);
    else if (!ev["xaxis.autorange"]) return;
    // Plotly's double-click returns a chart to its first range, the whole run: no zoom then.
    const longest = Math.max(0, ...this.durations.values());
    if (range && longest && Math.abs(range[0]) < 1e-6 && Math.abs(range[1] - longest) < 1e-6) range = null;
    this.window = range;
    // A zoom is applied to the others; the whole run to every chart, the one autoranged too.
    this.apply(this.range(), range ? div : null);
  }

  /** Show ``range`` on every member but ``source``; a member showing it already is left alone
   * (so the members' own relayout events end here). */
  apply(range, source) {
    if (!range) return;
    for (const d of this.divs) {
      if (d === source || !d.isConnected || !d._fullLayout || d.hidden) continue;
      const now = d._fullLayout.xaxis && d._fullLayout.xaxis.range;
      if (now && Math.abs(now[0] - range[0]) < 1e-6 && Math.abs(now[1] - range[1]) < 1e-6) continue;
      plotly().relayout(d, { "xaxis.range": [...range], "xaxis.autorange": false });
    }
    for (const d of this.divs) {
      if (this.window) d.dataset.zoomed = "1"; else delete d.dataset.zoomed;
    }
  }

  hovered(div, ev) {
    if (this.hovering || !ev.points || !ev.points.length) return;
    const x = ev.points[0].x;
    this.hovering = true;
    try {
      for (const d of this.divs) {
        if (d !== div && d.isConnected && d._fullLayout && !d.hidden) plotly().Fx.hover(d, { xval: x }, "xy", true);
      }
    } finally {
      this.hovering = false;
    }
  }

  unhovered(div) {
    if (this.hovering) return;
    this.hovering = true;
    try {
      for (const d of this.divs) if (d !== div && d.isConnected && d._fullLayout) plotly().Fx.unhover(d);
    } finally {
      this.hovering = false;
    }
  }
}

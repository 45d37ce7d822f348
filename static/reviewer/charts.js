// What a run's charts draw besides their lines: the axes with their units, the
// SLO lines, the fault and scale events as markers at their time, the note where
// a series stops, and the KV heatmap (hosts × units coloured by each worker's KV
// use). Used by runview.js and by the overlay of two compared runs.

export const CHART_HEIGHT = 240;

export const BASE_LAYOUT = {
  margin: { l: 56, r: 12, t: 28, b: 58 },
  legend: { orientation: "h", y: -0.36, font: { size: 10 } },
  font: { size: 11 },
  hovermode: "x unified",
};

/** The x axis every run chart shares: simulated time, from 0 to the run's end. */
export function timeAxis(duration, window = null) {
  const axis = { title: { text: "simulated time (s)", standoff: 2, font: { size: 10 } }, ticksuffix: " s" };
  if (window) return { ...axis, range: window, autorange: false };
  return duration ? { ...axis, range: [0, duration], autorange: false } : { ...axis, rangemode: "tozero" };
}

/** A chart's y axes from its spec: the unit as the title, log or fixed range, a second axis. */
export function valueAxes(chart) {
  const y = { title: { text: chart.y_title || "", font: { size: 10 } }, rangemode: "tozero" };
  if (chart.log) { y.type = "log"; delete y.rangemode; }
  if (chart.y_range) { y.range = chart.y_range; y.autorange = false; }
  const out = { yaxis: y };
  if (chart.metrics.some((m) => m.y2)) {
    out.yaxis2 = { title: { text: chart.y2_title || "", font: { size: 10 } }, overlaying: "y", side: "right", range: [0, 1.05], showgrid: false };
    out.margin = { ...BASE_LAYOUT.margin, r: 56 };
  }
  return out;
}

const MARKER_COLOUR = { kill: "#b42318", restore: "#027a48", scale: "#6d28d9" };
// A marker's label on the chart: an event's first words ("scale up chat"); the whole line on hover.
const LABEL_WORDS = 3;

/** Shapes and annotations: SLO line, event markers, and the stop note. */
export function decorations(chart, { slo = {}, markers = [], stop = null }) {
  const shapes = [];
  const annotations = [];
  const limit = chart.slo ? slo[chart.slo] : null;
  if (limit != null) {
    shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: limit, y1: limit,
      line: { color: "#b42318", width: 1.5, dash: "dash" }, name: "slo" });
    annotations.push({ xref: "paper", x: 0, xanchor: "left", yref: "y", y: limit, yanchor: "bottom",
      text: `SLO ${limit} s`, showarrow: false, font: { size: 10, color: "#b42318" } });
  }
  markers.forEach((m, i) => {
    const colour = MARKER_COLOUR[m.label.split(" ")[0]] || "#6b7280";
    shapes.push({ type: "line", xref: "x", x0: m.t, x1: m.t, yref: "paper", y0: 0, y1: 1,
      line: { color: colour, width: 1.5, dash: "dot" }, name: "event" });
    const words = m.label.split(" ");
    annotations.push({ xref: "x", x: m.t, yref: "paper", y: 1 - 0.12 * (i % 3), xanchor: "left",
      text: words.slice(0, LABEL_WORDS).join(" "), hovertext: m.label, showarrow: false,
      font: { size: 9, color: colour }, bgcolor: "rgba(255,255,255,0.7)" });
  });
  if (stop && chart.stops_without_completions) {
    annotations.push({ xref: "x", x: stop.t, yref: "paper", y: 0.5, xanchor: "left",
      text: stop.text, showarrow: false, font: { size: 10, color: "#92400e" }, bgcolor: "#fffbeb" });
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

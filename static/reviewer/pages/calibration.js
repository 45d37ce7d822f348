// The calibration page's chart: measured against fitted step time, one point per
// configuration, prompt and token steps as two series, outliers marked, and the
// y = x line on which a perfect fit would put every point. The step kinds come
// from the page config (config.stepKinds), never spelled out here.

import { config } from "../lib/config.js";
import { loadPlotly } from "../lib/api.js";

const SYMBOLS = ["circle", "diamond", "square", "triangle-up"];

function label(p) {
  const base = `${p.kind} P=${p.prompt_size} B=${p.batch_size}`;
  return p.token_size === null ? base : `${base} T=${p.token_size}`;
}

function series(points, name, marker) {
  return {
    type: "scatter", mode: "markers", name,
    x: points.map((p) => p.measured_s * 1000),
    y: points.map((p) => p.fitted_s * 1000),
    text: points.map((p) => `${label(p)}<br>error ${(p.error * 100).toFixed(1)} %`),
    hovertemplate: "%{text}<br>measured %{x:.2f} ms<br>fitted %{y:.2f} ms<extra></extra>",
    marker,
  };
}

async function draw() {
  const fit = config.fit;
  const box = document.getElementById("calibration-chart");
  if (!fit || !box) return;
  const Plotly = await loadPlotly(config.urls.plotly);
  const traces = config.stepKinds.map((kind, i) => series(
    fit.points.filter((p) => p.kind === kind.key && !p.outlier), kind.label,
    { size: 9, symbol: SYMBOLS[i % SYMBOLS.length] },
  ));
  const outliers = fit.points.filter((p) => p.outlier);
  if (outliers.length) {
    traces.push(series(outliers, "outliers (left out of the fit)",
      { size: 12, symbol: "x", color: "#c0392b" }));
  }
  const all = fit.points.flatMap((p) => [p.measured_s * 1000, p.fitted_s * 1000]);
  const lo = Math.min(...all) * 0.8;
  const hi = Math.max(...all) * 1.25;
  traces.push({
    type: "scatter", mode: "lines", name: "y = x (a perfect fit)", x: [lo, hi], y: [lo, hi],
    line: { dash: "dash", color: "#888", width: 1 }, hoverinfo: "skip",
  });
  Plotly.newPlot(box, traces, {
    margin: { l: 70, r: 20, t: 40, b: 60 },
    xaxis: { title: { text: "Measured step time (ms, log scale)" }, type: "log", dtick: "D2" },
    yaxis: { title: { text: "Fitted step time (ms, log scale)" }, type: "log", dtick: "D2" },
    legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    height: 460,
  }, { responsive: true, displaylogo: false });
  box.dataset.points = String(fit.points.length);
}

draw();

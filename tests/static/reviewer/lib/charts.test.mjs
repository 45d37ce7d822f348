// What a run's charts draw besides their lines: axes, SLO lines, markers, the KV heatmap.
import assert from "node:assert/strict";
import test from "node:test";

import { decorations, kvHeatmapTrace, MARKER_KINDS, timeAxis, valueAxes } from "../../../../static/reviewer/lib/charts.js";

test("the time axis spans the run, or the zoomed window when there is one", () => {
  assert.deepEqual(timeAxis(120).range, [0, 120]);
  assert.equal(timeAxis(120).autorange, false);
  assert.deepEqual(timeAxis(120, [10, 20]).range, [10, 20]);
  assert.equal(timeAxis(0).rangemode, "tozero");
});

test("a log chart is ticked at powers of ten and a second axis is added only when a metric asks", () => {
  const log = valueAxes({ log: true, y_title: "requests", metrics: [{ key: "ok" }] });
  assert.equal(log.yaxis.type, "log");
  assert.equal(log.yaxis.dtick, 1);
  assert.equal(log.yaxis2, undefined);
  const two = valueAxes({ metrics: [{ key: "a" }, { key: "b", y2: true }] });
  assert.equal(two.yaxis2.overlaying, "y");
});

test("an SLO draws one line in the chart's unit, and each kind of marker is in the legend once", () => {
  const chart = { slo: "ttft_s", scale: 1000, unit: "ms", metrics: [] };
  const markers = [{ t: 5, kind: "injected", label: "kill worker 1" }, { t: 9, kind: "injected", label: "restore worker 1" },
    { t: 12, kind: "scale", label: "scale up chat to 3" }];
  const { shapes, annotations } = decorations(chart, { slo: { ttft_s: 0.2 }, markers });
  const slo = shapes.find((s) => s.name === "slo");
  assert.equal(slo.y0, 200);
  assert.match(annotations[0].text, /SLO 200 ms/);
  const legended = shapes.filter((s) => s.showlegend).map((s) => s.name);
  assert.deepEqual(legended, [MARKER_KINDS.injected.legend, MARKER_KINDS.scale.legend]);
  assert.equal(annotations.at(-1).text, "scale up chat");
});

test("the KV heatmap colours each unit by its worker's KV use, dead workers and free units apart", () => {
  const grid = { hosts: 2, width: 2, cells: [[0, 1], [2, null]], names: ["a", "b", "c"] };
  const frame = { h: { alive: [1, 1] }, w: { state: [1, 2, 1], kv: [0.5, 0.9, 0.25], running: [3, 0, 1] } };
  const trace = kvHeatmapTrace(grid, frame);
  assert.deepEqual(trace.z, [[0.5, -0.1], [0.25, null]]);
  assert.match(trace.text[0][1], /dead/);
  assert.match(trace.text[1][1], /free/);
  assert.deepEqual(kvHeatmapTrace(grid, { ...frame, h: { alive: [0, 1] } }, { restyle: true }).z, [[[-0.1, -0.1], [0.25, null]]]);
});

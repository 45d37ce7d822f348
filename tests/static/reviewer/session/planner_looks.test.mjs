// The SLO planner's chart: the looks read from a run's summary and their traces.
import assert from "node:assert/strict";
import test from "node:test";

import { plannedLooks, plannerTraces } from "../../../../static/reviewer/session/planner_looks.js";

// Shaped as the server's vocabulary sends it (reviewer/views/mechanism_charts.py).
const CHART = {
  summaries: ["whole", "pools"], looks: "looks", x: "t",
  series: [{ key: "seen", label: "observed", colour: "#111" },
    { key: "ahead", label: "predicted", colour: "#222", dash: "dot" },
    { key: "cap", label: "capacity", colour: "#333", shape: "hv" }],
};
const LOOKS = { t: [15, 30], seen: [4, 5], ahead: [5, 6], cap: [11.5, 23] };

test("a run without a planner has no looks to draw", () => {
  assert.deepEqual(plannedLooks(CHART, null), []);
  assert.deepEqual(plannedLooks(CHART, { whole: { model: "chat", events: [] }, pools: { p: { events: [] } } }), []);
  assert.deepEqual(plannedLooks(null, { whole: { model: "chat", looks: LOOKS } }), []);
});

test("the model's planner comes first, then each pool's", () => {
  const planned = plannedLooks(CHART, { whole: { model: "chat", looks: LOOKS }, pools: { prefill: { looks: LOOKS } } });
  assert.deepEqual(planned.map((p) => p.name), ["chat", "pool prefill"]);
});

test("one planner draws its series in their colours; several name each trace", () => {
  const one = plannerTraces(CHART, [{ name: "pool decode", looks: LOOKS }]);
  assert.deepEqual(one.map((t) => t.name), ["observed", "predicted", "capacity"]);
  assert.deepEqual(one[2].x, [15, 30]);
  assert.deepEqual(one[2].y, [11.5, 23]);
  assert.equal(one[2].line.shape, "hv");
  assert.equal(one[1].line.dash, "dot");
  assert.equal(one[0].line.color, "#111");
  const other = { ...LOOKS, seen: [4, 6], ahead: [7, 8], cap: [14, 28] };
  const two = plannerTraces(CHART, [{ name: "pool prefill", looks: LOOKS }, { name: "pool decode", looks: other }]);
  assert.equal(two.length, 6);
  assert.equal(two[3].name, "pool decode observed");
  // Each planner in a colour of its own; its series told apart by dash and shape.
  assert.equal(two[0].line.color, two[1].line.color);
  assert.notEqual(two[0].line.color, two[3].line.color);
  assert.equal(two[4].line.dash, "dot");
  assert.equal(two[5].line.shape, "hv");
});

test("a series the same for several planners is drawn once, naming them all", () => {
  // Both pools of one model observe the same arrivals; their predictions differ.
  const decode = { ...LOOKS, ahead: [6, 7], cap: [14, 28] };
  const traces = plannerTraces(CHART, [{ name: "pool prefill", looks: LOOKS }, { name: "pool decode", looks: decode }]);
  assert.deepEqual(traces.map((t) => t.name), ["observed (pool prefill, pool decode)", "pool prefill predicted",
    "pool prefill capacity", "pool decode predicted", "pool decode capacity"]);
  assert.equal(traces[0].line.color, "#111");
  assert.deepEqual(traces[3].y, [6, 7]);
  // The same values at other times are not the same series.
  const later = { ...LOOKS, t: [20, 35] };
  assert.equal(plannerTraces(CHART, [{ name: "a", looks: LOOKS }, { name: "b", looks: later }]).length, 6);
});

// @ts-check
// The SLO planner's chart on the run page: from a run's summary, each planned
// autoscaler's looks (observed and predicted arrivals, the active workers' capacity)
// as plotly traces. ``chart`` is the server's description (config.mechanismCharts
// .plannerChart): which summary keys hold the autoscalers, which key their looks,
// the x key and each series' key, label, colour, dash and line shape.

/**
 * @typedef {{ key: string, label: string, colour?: string, dash?: string, shape?: string }} Series
 * @typedef {{ summaries: string[], looks: string, x: string, series: Series[] }} PlannerChart
 * @typedef {{ name: string, looks: Record<string, number[]> }} Planned
 */

/**
 * Each SLO-planned autoscaler of ``summary`` with its looks, the model's own first,
 * then each pool's.
 * @param {PlannerChart | null | undefined} chart
 * @param {any} summary
 * @returns {Planned[]}
 */
export function plannedLooks(chart, summary) {
  if (!summary || !chart) return [];
  const out = [];
  const [own, pools] = chart.summaries;
  const one = summary[own];
  if (one && one[chart.looks]) out.push({ name: String(one.model), looks: one[chart.looks] });
  for (const [pool, a] of Object.entries(summary[pools] || {})) {
    if (a && a[chart.looks]) out.push({ name: `pool ${pool}`, looks: a[chart.looks] });
  }
  return out;
}

/** One colour per planned autoscaler when several are drawn. */
const PALETTE = ["#e8590c", "#9c36b5", "#0c8599", "#c2255c", "#5c940d"];

/**
 * @param {number[] | undefined} a
 * @param {number[] | undefined} b
 */
function same(a, b) {
  return !!a && !!b && a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * The chart's traces: per planned autoscaler, each series of its looks. One
 * autoscaler draws its series in their own colours. Several draw each in a colour of
 * its own, the series told apart by their dash and line shape, and a series that is
 * the same for several (the pools of one model observe the same arrivals) is drawn
 * once, in the series' colour, naming them all.
 * @param {PlannerChart} chart
 * @param {Planned[]} planned
 * @returns {object[]}
 */
export function plannerTraces(chart, planned) {
  /** @type {{ trace: any, series: Series, names: string[], looks: Record<string, number[]> }[]} */
  const drawn = [];
  planned.forEach(({ name, looks }, i) => {
    for (const series of chart.series) {
      const twin = planned.length > 1 ? drawn.find((d) => d.series === series
        && same(d.looks[chart.x], looks[chart.x]) && same(d.looks[series.key], looks[series.key])) : undefined;
      if (twin) {
        twin.names.push(name);
        continue;
      }
      const colour = planned.length === 1 ? series.colour : PALETTE[i % PALETTE.length];
      const line = { color: colour, dash: series.dash, shape: series.shape };
      drawn.push({ trace: { x: looks[chart.x], y: looks[series.key], mode: "lines", line }, series, names: [name], looks });
    }
  });
  return drawn.map(({ trace, series, names }) => {
    if (planned.length === 1) return { ...trace, name: series.label };
    if (names.length === 1) return { ...trace, name: `${names[0]} ${series.label}` };
    return { ...trace, line: { ...trace.line, color: series.colour }, name: `${series.label} (${names.join(", ")})` };
  });
}

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

/**
 * The chart's traces: per planned autoscaler, each series of its looks; the series'
 * own colours when one autoscaler is drawn, its name before each label when several.
 * @param {PlannerChart} chart
 * @param {Planned[]} planned
 * @returns {object[]}
 */
export function plannerTraces(chart, planned) {
  const traces = [];
  for (const { name, looks } of planned) {
    for (const series of chart.series) {
      const line = { color: planned.length === 1 ? series.colour : undefined, dash: series.dash, shape: series.shape };
      traces.push({ x: looks[chart.x], y: looks[series.key], mode: "lines", line,
        name: planned.length > 1 ? `${name} ${series.label}` : series.label });
    }
  }
  return traces;
}

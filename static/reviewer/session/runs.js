// The break pass's emulator panel: one run, or two side by side (the same
// seed with a different policy, say), and opening a finding's evidence.

import { api, apiList, el } from "../lib/api.js";
import { changedKeysText } from "./breakpass.js";
import { BASE_LAYOUT, shapeTop, TimeAxisGroup, timeAxis, valueAxes, yExtent } from "../lib/charts.js";
import { RunView } from "./runview.js";

/** Two runs' charts on shared value axes: per chart, the same y range (their time
 * axis is one TimeAxisGroup, zoomed together). */
function shareAxes(a, b) {
  const P = window.Plotly;
  if (!a.layout || !b.layout) return;
  for (const ca of a.shownCharts()) {
    const cb = b.shownCharts().find((c) => c.key === ca.key);
    if (!cb || ca.y_range) continue;
    const ea = yExtent(ca.div);
    const eb = yExtent(cb.div);
    if (!ea && !eb) continue;
    const lo = Math.min(ea ? ea[0] : Infinity, eb ? eb[0] : Infinity);
    const hi = Math.max(ea ? ea[1] : -Infinity, eb ? eb[1] : -Infinity, shapeTop(ca.div));
    const range = ca.log ? [Math.log10(Math.max(lo, 0.5)), Math.log10(Math.max(hi, 1)) + 0.1] : [0, hi > 0 ? hi * 1.08 : 1];
    const same = (r) => r && Math.abs(r[0] - range[0]) < 1e-9 && Math.abs(r[1] - range[1]) < 1e-9;
    if (same(ca.div.layout.yaxis.range) && same(cb.div.layout.yaxis.range)) continue;
    const update = { "yaxis.range": range, "yaxis.autorange": false };
    P.relayout(ca.div, update);
    P.relayout(cb.div, update);
  }
}

// One colour per metric in the overlay, the same for A and B.
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/** Both runs' lines on one set of charts, B dashed. */
function drawOverlay(box, a, b) {
  const P = window.Plotly;
  const duration = Math.max((a.run && a.run.duration_s) || 0, (b.run && b.run.duration_s) || 0);
  const divs = [];
  for (const ca of a.shownCharts()) {
    const cb = b.shownCharts().find((c) => c.key === ca.key);
    if (!cb) continue;
    let div = box.querySelector(`[data-chart="${ca.key}"]`);
    if (!div) div = el("div", { class: "chart", "data-chart": ca.key });
    divs.push(div);
    const traces = [
      ...(ca.div.data || []).map((t, i) => ({ ...t, uid: undefined, name: `A ${t.name}`, line: { ...(t.line || {}), dash: "solid", color: PALETTE[i % PALETTE.length] } })),
      ...(cb.div.data || []).map((t, i) => ({ ...t, uid: undefined, name: `B ${t.name}`, line: { ...(t.line || {}), dash: "dash", color: PALETTE[i % PALETTE.length] } })),
    ];
    const layoutOf = (d) => d.layout || {};
    P.react(div, traces, {
      ...BASE_LAYOUT, ...valueAxes(ca), xaxis: timeAxis(duration), height: 260,
      title: { text: `${ca.title}: A solid, B dashed`, font: { size: 12 } },
      // A's SLO line and markers, and B's markers where they differ.
      shapes: [...(layoutOf(ca.div).shapes || []), ...(layoutOf(cb.div).shapes || []).filter((sh) => sh.xref === "x")],
      annotations: layoutOf(ca.div).annotations || [],
    }, { displaylogo: false, responsive: true });
  }
  box.replaceChildren(...divs);
}

export function initRuns(ctx) {
  const box = document.getElementById("runs-panel");
  if (!ctx.config.fleet) {
    box.replaceChildren(el("p", { class: "muted" }, "This session has no fleet config, so there is nothing to run."));
    return;
  }
  const side = el("div", { class: "runs-side" });
  // One time axis for every chart of both runs: zoom, pan and crosshair together.
  const timeGroup = new TimeAxisGroup();
  const left = new RunView(ctx, { label: "Run A", timeGroup });
  let right = null;
  side.append(left.node);

  // The comparison worth running on this scenario, and when the policies are
  // identical: reasoned from the scenario at once, then checked by running it.
  let suggested = null;
  const advice = el("div", { class: "break-advice", "aria-live": "polite" });
  const compare = el("button", { type: "button" }, "Compare with a second run");
  const compareLabel = () => (suggested ? `Compare with ${suggested.label}` : "Compare with a second run");
  function showAdvice(facts, checking) {
    suggested = facts.suggested || null;
    const eq = facts.equivalent;
    advice.dataset.measured = facts.measured ? "true" : "false";
    advice.replaceChildren(...[
      eq ? el("p", { class: "note", "data-equivalent": eq.policies.join(",") }, `Policies alike here: ${eq.why}`) : null,
      suggested ? el("p", { class: "muted" },
        `Suggested comparison: the doc as written against ${suggested.label} (${changedKeysText(suggested.overrides)}). ${suggested.why}`,
        suggested.measured ? ` Measured on this fleet config: ${suggested.measured}.` : "") : null,
      checking ? el("p", { class: "muted" }, "Checking the suggestion by running the scenario…") : null,
      facts.note ? el("p", { class: "muted" }, `Suggestion ${facts.note}.`) : null,
    ].filter(Boolean));
    if (!right) compare.textContent = compareLabel();
  }
  showAdvice(ctx.config.fleet.breakControls || {}, true);
  // A worker runs the scenario once per fleet version; until it is done the
  // answer is pending, and the page asks again (for up to ten minutes).
  const adviceGiveUp = Date.now() + 10 * 60 * 1000;
  function askAdvice() {
    api(ctx.config.urls.breakAdvice)
      .then((facts) => {
        if (!facts || !facts.pending) { showAdvice(facts, false); return; }
        if (Date.now() > adviceGiveUp) {
          showAdvice(ctx.config.fleet.breakControls || {}, false);
          ctx.say("The suggested comparison is still being checked; reload the page later to see it measured.");
          return;
        }
        setTimeout(askAdvice, 1000 * (facts.retry_after_s || 2));
      })
      .catch((err) => { showAdvice(ctx.config.fleet.breakControls || {}, false); ctx.say(`Could not check the suggested comparison: ${err.message}`); });
  }
  askAdvice();

  const overlay = el("input", { type: "checkbox", "aria-label": "Overlay run B on run A" });
  const overlayLabel = el("label", { class: "inline", hidden: true }, overlay, " Overlay the two runs on one set of charts");
  const overlayBox = el("div", { class: "overlay-charts", hidden: true });
  let syncPending = false;
  function sync() {
    if (!right || syncPending) return;
    syncPending = true;
    // At most a few times a second: the charts grow every frame.
    setTimeout(() => {
      syncPending = false;
      if (!right) return;
      shareAxes(left, right);
      if (overlay.checked) drawOverlay(overlayBox, left, right);
    }, 400);
  }
  overlay.addEventListener("change", () => {
    overlayBox.hidden = !overlay.checked;
    side.classList.toggle("overlaid", overlay.checked);
    if (overlay.checked) drawOverlay(overlayBox, left, right);
  });
  left.onDrawn = sync;
  left.partner = () => right;
  compare.addEventListener("click", () => {
    if (right) {
      right.closeSocket();
      timeGroup.remove(right, [...right.charts.map((c) => c.div), ...right.mechanisms.shownDivs()]);
      right.node.remove();
      right = null;
      side.classList.remove("two", "overlaid");
      overlay.checked = false;
      overlayBox.hidden = true;
      overlayLabel.hidden = true;
      compare.textContent = compareLabel();
      requestAnimationFrame(() => left.resize());
      return;
    }
    right = new RunView(ctx, { label: "Run B", timeGroup });
    right.seed.value = left.seed.value;
    right.speed.value = left.speed.value;
    right.onDrawn = sync;
    right.partner = () => left;
    if (suggested) right.overrides.value = right.changes.apply(suggested.overrides).join("; ");
    side.append(right.node);
    side.classList.add("two");
    overlayLabel.hidden = false;
    compare.textContent = "Close the second run";
    requestAnimationFrame(() => left.resize());
  });

  // Earlier runs of the session, to watch again (frames are stored) or compare.
  const earlier = el("select", { "aria-label": "Open an earlier run" }, el("option", { value: "" }, "Open an earlier run…"));
  async function loadEarlier() {
    try {
      const runs = await apiList(`${ctx.config.urls.runs}?session=${ctx.config.sessionId}`);
      earlier.replaceChildren(el("option", { value: "" }, "Open an earlier run…"),
        ...runs.filter((r) => r.sweep == null).map((r) => el("option", { value: r.id },
          `run ${r.id} · ${r.status}${r.queue_position ? ` (place ${r.queue_position} in the queue)` : ""} · seed ${r.seed} · ${changedKeysText(r.overrides)}`)));
    } catch (err) {
      ctx.say(`Could not list earlier runs: ${err.message}`);
    }
  }
  earlier.addEventListener("focus", loadEarlier);
  earlier.addEventListener("change", () => {
    if (!earlier.value) return;
    (right || left).open(Number(earlier.value));
    earlier.value = "";
  });
  loadEarlier();

  box.replaceChildren(
    el("p", { class: "muted" }, `Runs play the session's fleet config "${ctx.config.fleet.name}". The buttons change one key for one run; "more overrides" takes any other, e.g. traffic.qps=500.`),
    advice,
    el("div", { class: "row" }, compare, overlayLabel, earlier),
    side,
    overlayBox);

  const refreshTargets = () => { left.fillTargets(); if (right) right.fillTargets(); };
  ctx.events.addEventListener("findings", refreshTargets);
  ctx.events.addEventListener("show-evidence", (e) => {
    const f = e.detail;
    if (f.evidence_run_id == null) return;
    left.pendingWindow = f.evidence_t_from_s != null ? [f.evidence_t_from_s, f.evidence_t_to_s] : null;
    left.open(f.evidence_run_id);
    // A comparison opens its second run beside the first, over the same window.
    if (f.evidence_compare_run_id != null) {
      if (!right) compare.click();
      right.pendingWindow = left.pendingWindow;
      right.open(f.evidence_compare_run_id);
    }
    left.node.scrollIntoView({ block: "start" });
  });
}

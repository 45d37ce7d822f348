// Placement: the hosts × units heatmap used by live runs (coloured by worker
// state and backlog), and the placement solver's ranked layouts with their
// failure verdicts and "use this layout".

import { api, el, fleetFigures } from "../lib/api.js";

const BACKLOG_CAP = 10;
export const HEATMAP_LEGEND = "Heatmap: dark red dead · pale green idle · blue busy · orange busy with a backlog of queued batches · blank free unit. Hover a cell for details.";

/** Which worker sits on each unit of each host, from a run's layout. */
export function unitGrid(layout) {
  const hosts = layout.hosts.length;
  const width = Math.max(1, ...layout.hosts.map((h) => h.units));
  const cells = Array.from({ length: hosts }, () => Array(width).fill(null));
  const w = layout.workers;
  const perModel = {};
  const names = w.model.map((mi) => {
    const m = layout.models[mi];
    perModel[m] = (perModel[m] ?? -1) + 1;
    return `${m} worker ${perModel[m]}`;
  });
  w.model.forEach((_, i) => {
    for (let u = w.first_unit[i]; u < w.first_unit[i] + w.units[i]; u++) {
      if (cells[w.host[i]] && u < width) cells[w.host[i]][u] = i;
    }
  });
  return { hosts, width, cells, names, layout };
}

/**
 * The heatmap trace for a frame (null: before the first frame).
 * z: 0 dead, 1 idle, 2 busy, 2+n busy with n batches queued (capped).
 */
export function heatmapTrace(grid, frame, { restyle = false } = {}) {
  const z = [];
  const text = [];
  for (let h = 0; h < grid.hosts; h++) {
    const hostAlive = !frame || frame.h.alive[h] !== 0;
    const row = [];
    const tips = [];
    for (let u = 0; u < grid.width; u++) {
      const w = grid.cells[h][u];
      if (w === null) {
        row.push(null);
        tips.push(`host ${h} unit ${u}: free`);
        continue;
      }
      const state = frame ? frame.w.state[w] : 0;
      const backlog = frame ? frame.w.backlog[w] || 0 : 0;
      let value;
      let label;
      if (!hostAlive || state === 2) { value = 0; label = "dead"; }
      else if (state === 1) { value = 2 + Math.min(backlog, BACKLOG_CAP); label = `busy, ${backlog} queued`; }
      else { value = 1; label = backlog ? `idle, ${backlog} queued` : "idle"; }
      row.push(value);
      tips.push(`host ${h} unit ${u}: ${grid.names[w]}, ${label}`);
    }
    z.push(row);
    text.push(tips);
  }
  if (restyle) return { z: [z], text: [text] };
  const top = 2 + BACKLOG_CAP;
  const at = (v) => v / top;
  return {
    type: "heatmap",
    z,
    text,
    hoverinfo: "text",
    x: Array.from({ length: grid.width }, (_, u) => u),
    y: Array.from({ length: grid.hosts }, (_, h) => `host ${h}`),
    zmin: 0,
    zmax: top,
    xgap: 2,
    ygap: 2,
    showscale: false,
    colorscale: [
      [0, "#7f1d1d"], [at(0.5), "#7f1d1d"],
      [at(0.5), "#cfe8cf"], [at(1.5), "#cfe8cf"],
      [at(1.5), "#3b7dd8"], [at(2.5), "#3b7dd8"],
      [at(2.5), "#f6b26b"], [1, "#d9480f"],
    ],
  };
}

const MODEL_COLOURS = ["#3b7dd8", "#8e44ad", "#16a085", "#d35400", "#c0392b", "#2c3e50"];

/** The solver's verdict: a model with no worker, or one a single host's loss takes down, fails it. */
export function verdictText(entry) {
  const problems = (entry.unplaced || []).map((model) => `${model} has no worker at all`);
  for (const [model, failures] of Object.entries(entry.lost_with || {})) {
    for (const failure of failures) problems.push(`losing ${failure} takes ${model} down`);
  }
  if (problems.length || entry.survives_any_host_loss !== true) {
    return { ok: false, text: `✗ ${problems.join("; ") || "not every model survives the loss of any one host"}` };
  }
  return { ok: true, text: "✓ every model survives the loss of any one host" };
}

function verdict(entry) {
  const { ok, text } = verdictText(entry);
  return el("p", { class: `verdict ${ok ? "ok" : "bad"}` }, text);
}

function layoutCard(ctx, entry, models, onUse) {
  const colour = (name) => MODEL_COLOURS[Math.max(0, models.indexOf(name)) % MODEL_COLOURS.length];
  const strips = entry.hosts.map((host, i) => el("div", { class: "row", "aria-label": `host ${i}` },
    el("span", { class: "muted mono" }, `h${i}`),
    el("div", { class: "strip", style: `flex:1;grid-template-columns:repeat(${host.strip.length},1fr)` },
      host.strip.map((name) => el("span", {
        style: `background:${name ? colour(name) : "#e4e7ec"}`,
        title: name || "free",
      }, name ? name[0] : "")))));
  const cases = el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "Lost"), ...models.map((m) => el("th", { class: "num" }, `${m} capacity`)))),
    el("tbody", {}, (entry.cases || []).map((c) => el("tr", {},
      el("td", {}, c.failure === "none" ? "nothing" : `${c.failure}${c.alike > 1 ? ` (or any of ${c.alike} alike)` : ""}`),
      ...models.map((m) => el("td", { class: "num" }, c.capacity[m] == null ? "–" : Number(c.capacity[m]).toFixed(1)))))));
  // What "use this layout" made is said here, beside its button, not at the foot of the list.
  const result = el("p", { class: "status-line layout-result", role: "status" });
  const use = el("button", { type: "button", onclick: () => onUse(entry, use, result) }, "Use this layout");
  const edit = el("button", { type: "button", onclick: () => editLayout(ctx, entry) }, "Edit this layout first");
  return el("article", { class: "layout-card", dataset: { rank: entry.rank } },
    el("h4", {}, `#${entry.rank} ${entry.label || ""}`),
    strips,
    verdict(entry),
    el("p", { class: "muted" }, `${Number(entry.nominal_qps || 0).toFixed(0)} QPS nominal · ${entry.wasted_units} units wasted`),
    cases, el("div", { class: "row" }, use, edit), result);
}

/** Open the fleet editor on a new config: this fleet with the layout's hosts, not yet saved. */
function editLayout(ctx, entry) {
  const fleet = ctx.config.fleet;
  sessionStorage.setItem(LAYOUT_KEY, JSON.stringify({ from: fleet.id, hosts: entry.host_groups, name: entry.config_name }));
  location.assign(`/fleets/new?from=${fleet.id}&session=${ctx.config.sessionId}`);
}

/** Where "edit this layout first" leaves the layout for the fleet editor to pick up. */
export const LAYOUT_KEY = "fleet-editor-layout";

export async function initPlacement(ctx) {
  const box = document.getElementById("placement-panel");
  const fleet = ctx.config.fleet;
  const result = await fleetFigures(box, fleet, ctx.config.urls.placement, {
    noFleet: "This session has no fleet config to place.",
    failed: "The placement could not be solved",
  });
  if (!result) return;
  const models = Object.keys(result.workers || {});

  async function use(entry, button, status) {
    button.disabled = true;
    const scenario = JSON.parse(JSON.stringify(fleet.scenario));
    scenario.hosts = entry.host_groups;
    const name = entry.config_name || `${fleet.name} · layout ${entry.rank}`.slice(0, 200);
    try {
      const created = await api("/api/fleets/", { method: "POST", body: { name, scenario } });
      const actions = [el("span", {}, `Made fleet config "${created.name}". `),
        el("a", { href: `/fleets/${created.id}/edit?session=${ctx.config.sessionId}` }, "Open it in the editor"), " "];
      if (ctx.config.canManage) {
        actions.push(el("button", {
          type: "button",
          onclick: async () => {
            try {
              await api(ctx.config.urls.session, { method: "PATCH", body: { fleet_config: created.id } });
              location.reload();
            } catch (err) { status.textContent = `Could not switch: ${err.message}`; }
          },
        }, "Review with it in this session"));
      }
      status.replaceChildren(...actions);
    } catch (err) {
      status.textContent = `Could not make a fleet config: ${err.message}`;
      button.disabled = false;
    }
  }

  box.replaceChildren(
    el("p", { class: "muted" }, `${result.hosts} hosts of ${result.units} units; workers ${models.map((m) => `${m} ${result.workers[m]} units`).join(", ")}; traffic split ${models.map((m) => `${m} ${Math.round(100 * (result.split[m] || 0))}%`).join(", ")}.`),
    ...(result.notes || []).map((n) => el("p", { class: "muted" }, n)),
    el("div", { class: "layouts" }, (result.ranked || []).map((entry) => layoutCard(ctx, entry, models, use))));
}

// The trace pass: one request's path drawn as an inline SVG diagram. Each hop
// shows the fleet config's facts about it and the findings attached to it; a
// hop is chosen by click or keyboard and a finding can be filed against it.

import { el } from "./api.js";
import { findingItem } from "./findings.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function facts(s) {
  if (!s) return {};
  const d = s.dispatcher || {}, w = s.worker || {}, c = s.client || {}, g = s.gateway || {};
  const models = Object.keys(s.models || {});
  return {
    client: [`timeout ${c.timeout_s ?? "?"}${typeof c.timeout_s === "number" ? " s" : ""}`, `retries ${c.retries ?? 0}`],
    gateway: [`${g.instances ?? "?"} instances`, g.rate_limit_qps ? `limit ${g.rate_limit_qps}/key` : "no rate limit",
      g.shared_counter === false ? "counters per instance" : "shared counter"],
    dispatcher: [`${d.policy ?? "?"}, ${d.max_batch_tokens ?? "?"} tokens`, `close after ${d.close_after_s ?? "?"}`,
      `queue ${d.queue_limit ? d.queue_limit : "unbounded"}, standby ${d.standby ?? "?"}`],
    worker: [`${w.batch_s ?? "?"} s per batch`, `${w.service ?? "?"} service`, `${models.length} model(s)`],
    response_path: [d.standby === "replicated" ? "mapping survives failover" : "mapping lost with the dispatcher"],
  };
}

export function initTrace(ctx) {
  const box = document.getElementById("trace-panel");
  const hops = ctx.config.hops; // [{key, label, returns}] in the request's order
  const forward = hops.filter((h) => !h.returns);
  const back = hops.find((h) => h.returns);
  const info = facts(ctx.config.fleet && ctx.config.fleet.scenario);
  // The dispatcher, in the middle of the path, is where most findings sit.
  let selected = forward[Math.floor(forward.length / 2)].key;

  const width = 820, boxW = 160, boxH = 92, gap = (width - forward.length * boxW) / (forward.length - 1 || 1);
  const drawing = svg("svg", { viewBox: `0 0 ${width} 200`, class: "trace-svg", role: "group", "aria-label": "The request's path" });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrowhead", markerWidth: 10, markerHeight: 8, refX: 9, refY: 4, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,4 L0,8 z", fill: "#7b8aa3" }));
  defs.append(marker);
  drawing.append(defs);

  const hopNodes = new Map();
  function hopGroup(h, x, y, w, h2) {
    const g = svg("g", { class: "hop", tabindex: 0, role: "button", "data-hop": h.key, "aria-label": `${h.label}: show its findings` });
    g.append(svg("rect", { x, y, width: w, height: h2, rx: 8 }));
    g.append(svg("text", { x: x + 10, y: y + 20 }, h.label));
    (info[h.key] || []).forEach((line, i) => g.append(svg("text", { x: x + 10, y: y + 38 + i * 14, class: "facts" }, line)));
    const count = svg("text", { x: x + w - 10, y: y + 20, class: "count", "text-anchor": "end" }, "");
    g.append(count);
    g.addEventListener("click", () => select(h.key));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(h.key); }
    });
    hopNodes.set(h.key, { g, count });
    drawing.append(g);
  }

  forward.forEach((h, i) => {
    const x = i * (boxW + gap);
    hopGroup(h, x, 10, boxW, boxH);
    if (i < forward.length - 1) {
      drawing.append(svg("path", { class: "arrow", d: `M${x + boxW + 2},${10 + boxH / 2} L${x + boxW + gap - 4},${10 + boxH / 2}`, "marker-end": "url(#arrowhead)" }));
    }
  });
  if (back) {
    const y = 150;
    drawing.append(svg("path", { class: "arrow back", d: `M${width - boxW / 2},${10 + boxH + 2} L${width - boxW / 2},${y + 16} L${boxW + 4},${y + 16}`, "marker-end": "url(#arrowhead)" }));
    hopGroup(back, width / 2 - 130, y - 4, 260, 44);
  }

  const hopTitle = el("h3");
  const list = el("ul", { class: "finding-list" });
  const add = el("button", { type: "button", class: "primary", onclick: () => ctx.openFindingForm({ pass: ctx.config.pass.TRACE, hop: selected }) }, "New finding on this hop");

  function draw() {
    const all = ctx.store.all();
    for (const [key, { g, count }] of hopNodes) {
      const n = all.filter((f) => f.trace_hop === key).length;
      count.textContent = n ? String(n) : "";
      g.classList.toggle("has-findings", n > 0);
      g.classList.toggle("selected", key === selected);
      g.setAttribute("aria-pressed", key === selected ? "true" : "false");
    }
    const label = hops.find((h) => h.key === selected)?.label || selected;
    hopTitle.textContent = `Findings at the ${label.toLowerCase()}`;
    const items = all.filter((f) => f.trace_hop === selected);
    list.replaceChildren(...(items.length
      ? items.map((f) => findingItem(f, { onAction: ctx.onFindingAction, username: ctx.config.user.username }))
      : [el("li", { class: "muted" }, "None yet.")]));
  }
  function select(key) { selected = key; draw(); }

  box.replaceChildren(drawing, el("p", { class: "muted" }, "Choose a hop (click, or Tab and Enter) to see and file findings about it."), hopTitle, list, add);
  draw();
  ctx.events.addEventListener("findings", draw);
}

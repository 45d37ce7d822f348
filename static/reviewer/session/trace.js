// The trace pass: one request's path drawn as an inline SVG diagram. Each hop
// shows the fleet config's facts about it and the findings attached to it; a
// hop is chosen by click or keyboard and a finding can be filed against it.

import { el } from "../lib/api.js";
import { findingItem } from "./findings.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

// The diagram is drawn at the panel's own width (one SVG unit a CSS pixel), so its
// type keeps the stylesheet's sizes (13-14 px) at any width; a hop's figures wrap
// onto more lines rather than being cut.
const MOST_PER_ROW = 3;
const LEAST_BOX_W = 230;
const GAP = 34;
const LINE = 18;
const PAD = 12;
const LABEL_FONT = "600 14px";
const FACT_FONT = "13px";

/** Text width in px in the panel's font, measured on a canvas. */
function measurer(node) {
  const family = getComputedStyle(node).fontFamily || "sans-serif";
  const ctx = document.createElement("canvas").getContext("2d");
  return (text, font) => { ctx.font = `${font} ${family}`; return ctx.measureText(text).width; };
}

/** ``text`` broken at spaces into lines no wider than ``width`` (a word longer than a
 * line is broken where it must be, never cut short). */
function wrap(text, width, measure, font) {
  const lines = [];
  let line = "";
  for (const word of text.split(" ")) {
    const next = line ? `${line} ${word}` : word;
    if (measure(next, font) <= width) { line = next; continue; }
    if (line) lines.push(line);
    line = word;
    while (measure(line, font) > width && line.length > 1) {
      let cut = line.length - 1;
      while (cut > 1 && measure(line.slice(0, cut), font) > width) cut--;
      lines.push(line.slice(0, cut));
      line = line.slice(cut);
    }
  }
  if (line) lines.push(line);
  return lines.length ? lines : [""];
}

/** The path as the server drew it from the fleet config, or the five hops of the
 * vocabulary (with no figures) for a session without one. */
function pathOf(ctx) {
  const drawn = ctx.config.fleet && ctx.config.fleet.tracePath;
  if (drawn && drawn.length) return drawn;
  return ctx.config.hops.map((h) => ({ key: h.key, label: h.label, facts: [] }));
}

export function initTrace(ctx) {
  const box = document.getElementById("trace-panel");
  const hops = ctx.config.hops; // every hop a finding can be filed on: [{key, label, returns}]
  const path = pathOf(ctx);
  const returning = new Set(hops.filter((h) => h.returns).map((h) => h.key));
  const forward = path.filter((h) => !returning.has(h.key));
  const back = path.find((h) => returning.has(h.key));
  // The hop with the most findings is shown first; without any, the middle of the path.
  const counted = forward.map((h) => [h.key, ctx.store.all().filter((f) => f.trace_hop === h.key).length]);
  const busiest = counted.reduce((a, b) => (b[1] > a[1] ? b : a), [null, 0]);
  let selected = busiest[0] || forward[Math.floor((forward.length - 1) / 2)].key;

  const hopNodes = new Map();
  const holder = el("div", { class: "trace-drawing" });

  /** The path at ``width`` px: rows of up to three hops as wide as fit, read left
   * to right; the response path returns below. */
  function drawPath(width) {
    const measure = measurer(box);
    const perRow = Math.max(1, Math.min(MOST_PER_ROW, forward.length, Math.floor((width + GAP) / (LEAST_BOX_W + GAP))));
    const rows = Math.ceil(forward.length / perRow);
    const boxW = (width - 2 - (perRow - 1) * GAP) / perRow;
    const inner = boxW - 2 * PAD;
    const text = (h, w) => ({
      label: wrap(h.label, w - 2 * PAD - 24, measure, LABEL_FONT),
      facts: (h.facts || []).flatMap((line) => wrap(line, w - 2 * PAD, measure, FACT_FONT)),
    });
    const forwardText = forward.map((h) => text(h, boxW));
    const heightOf = (t) => 2 * PAD + 4 + t.label.length * LINE + Math.max(1, t.facts.length) * LINE;
    const boxH = Math.max(...forwardText.map(heightOf));
    const rowH = boxH + GAP;
    const backW = Math.min(width - 2, 2 * boxW);
    const backText = back ? text(back, backW) : null;
    const backY = rows * rowH + 6;
    const bh = back ? heightOf(backText) : 0;
    const height = back ? backY + bh + 6 : rows * rowH;
    const drawing = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "trace-svg", role: "group", "aria-label": "The request's path" });
    const defs = svg("defs");
    const marker = svg("marker", { id: "arrowhead", markerWidth: 10, markerHeight: 8, refX: 9, refY: 4, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L10,4 L0,8 z", fill: "#7b8aa3" }));
    defs.append(marker);
    drawing.append(defs);
    hopNodes.clear();

    function hopGroup(h, t, x, y, w, h2) {
      const g = svg("g", { class: "hop", tabindex: 0, role: "button", "data-hop": h.key, "aria-label": `${h.label}: show its findings` });
      g.append(svg("rect", { x: x + 1, y, width: w, height: h2, rx: 8 }));
      let ty = y + PAD + 14;
      for (const line of t.label) { g.append(svg("text", { x: x + 1 + PAD, y: ty, class: "label" }, line)); ty += LINE; }
      ty += 4;
      for (const line of t.facts) {
        const node = svg("text", { x: x + 1 + PAD, y: ty, class: "facts" }, line);
        g.append(node);
        ty += LINE;
      }
      const count = svg("text", { x: x + 1 + w - PAD, y: y + PAD + 14, class: "count", "text-anchor": "end" }, "");
      g.append(count);
      g.addEventListener("click", () => select(h.key));
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(h.key); }
      });
      hopNodes.set(h.key, { g, count });
      drawing.append(g);
    }

    const place = (i) => ({ x: (i % perRow) * (boxW + GAP), y: 6 + Math.floor(i / perRow) * rowH });
    forward.forEach((h, i) => {
      const { x, y } = place(i);
      hopGroup(h, forwardText[i], x, y, boxW, boxH);
      if (i === forward.length - 1) return;
      const next = place(i + 1);
      const d = next.y === y
        ? `M${x + boxW + 3},${y + boxH / 2} L${next.x - 3},${y + boxH / 2}`
        // To the next row: down from this hop, back along the gap, into the next hop's top.
        : `M${x + boxW / 2},${y + boxH + 2} L${x + boxW / 2},${y + boxH + GAP / 2} L${next.x + boxW / 2},${y + boxH + GAP / 2} L${next.x + boxW / 2},${next.y - 4}`;
      drawing.append(svg("path", { class: "arrow", d, "marker-end": "url(#arrowhead)" }));
    });
    if (back) {
      const last = place(forward.length - 1);
      const x = (width - backW) / 2;
      const from = last.x + boxW / 2;
      // Down from the last hop, then along to the nearer side of the response path.
      const to = from < x ? x - 4 : from > x + backW ? x + backW + 4 : null;
      const d = to === null
        ? `M${from},${last.y + boxH + 2} L${from},${backY - 4}`
        : `M${from},${last.y + boxH + 2} L${from},${backY + bh / 2} L${to},${backY + bh / 2}`;
      drawing.append(svg("path", { class: "arrow back", d, "marker-end": "url(#arrowhead)" }));
      hopGroup(back, backText, x, backY, backW, bh);
    }
    holder.replaceChildren(drawing);
  }

  const onPath = new Set(path.map((h) => h.key));

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
    const label = path.find((h) => h.key === selected)?.label || hops.find((h) => h.key === selected)?.label || selected;
    hopTitle.textContent = `Findings at the ${label.toLowerCase()}`;
    const items = all.filter((f) => f.trace_hop === selected);
    list.replaceChildren(...(items.length
      ? items.map((f) => findingItem(f, { onAction: ctx.onFindingAction, username: ctx.config.user.username }))
      : [el("li", { class: "muted" }, "None yet.")]));
  }
  function select(key) { selected = key; draw(); }

  // Findings filed on a hop this system does not have (a path drawn before the fleet changed).
  const elsewhere = el("div", { class: "trace-elsewhere" });
  function drawElsewhere() {
    const items = ctx.store.all().filter((f) => f.trace_hop && !onPath.has(f.trace_hop));
    elsewhere.replaceChildren(...(items.length ? [
      el("h3", {}, "Findings on hops this fleet does not have"),
      el("ul", { class: "finding-list" }, items.map((f) => findingItem(f, { onAction: ctx.onFindingAction, username: ctx.config.user.username }))),
    ] : []));
  }
  const source = ctx.config.fleet && ctx.config.fleet.tracePath && ctx.config.fleet.tracePath.length
    ? `The path is drawn from the fleet config "${ctx.config.fleet.name}": each hop shows its figures (queues, capacity, timeouts).`
    : "This session has no fleet config: the path is the generic one, without figures.";
  box.replaceChildren(el("p", { class: "muted" }, source), holder,
    el("p", { class: "muted" }, "Choose a hop (click, or Tab and Enter) to see and file findings about it."), hopTitle, list, add, elsewhere);
  ctx.events.addEventListener("findings", drawElsewhere);
  drawElsewhere();
  // Drawn again whenever the panel's width changes (a window resized, a pane shown).
  let drawnWidth = 0;
  function fit() {
    const width = Math.floor(holder.clientWidth);
    if (!width || width === drawnWidth) return;
    drawnWidth = width;
    drawPath(width);
    draw();
  }
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => fit()).observe(holder);
  fit();
  if (!drawnWidth) { drawPath(820); draw(); }
  ctx.events.addEventListener("findings", draw);
}

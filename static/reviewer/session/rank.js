// The rank pass: findings in three columns (fix now, clarify, mention),
// reordered by drag and drop or by keyboard, and saved at once for everyone.
//
// Keyboard: focus a card, Space or Enter picks it up, the arrow keys move it
// (up/down within a column, left/right between columns), Space or Enter drops
// it and saves, Escape puts it back.

import { api, el } from "../lib/api.js";
import { authorName, passOf } from "./findings.js";

export function initRank(ctx) {
  const COLUMNS = ctx.config.severities; // [{key, label}], most urgent first
  const box = document.getElementById("rank-panel");
  const canRank = ctx.config.canManage;
  const live = el("p", { class: "status-line", role: "status", "aria-live": "assertive" });
  const board = el("div", { class: "rank-board" });
  const lists = {};
  let grabbed = null; // {id, fromSeverity, fromIndex} while a card is held by keyboard
  let dragId = null;
  let saving = false;

  for (const col of COLUMNS) {
    const list = el("ol", { "aria-label": col.label, dataset: { severity: col.key } });
    const count = el("span", { class: "muted" });
    const column = el("section", { class: "rank-col", dataset: { severity: col.key } },
      el("h3", {}, el("span", {}, col.label), count), list);
    lists[col.key] = { list, count, column };
    column.addEventListener("dragover", (e) => {
      if (dragId === null) return;
      e.preventDefault();
      column.classList.add("drop-target");
    });
    column.addEventListener("dragleave", () => column.classList.remove("drop-target"));
    column.addEventListener("drop", (e) => {
      e.preventDefault();
      column.classList.remove("drop-target");
      const id = Number(e.dataTransfer.getData("text/plain") || dragId);
      dragId = null;
      if (!id) return;
      save(id, col.key, dropIndex(list, e.clientY, id));
    });
    board.append(column);
  }

  function dropIndex(list, y, movingId) {
    const cards = [...list.children].filter((c) => Number(c.dataset.findingId) !== movingId);
    const i = cards.findIndex((c) => {
      const r = c.getBoundingClientRect();
      return y < r.top + r.height / 2;
    });
    return i === -1 ? cards.length : i;
  }

  function card(f) {
    const node = el("li", {
      class: "rank-card",
      tabindex: 0,
      draggable: canRank ? "true" : "false",
      "aria-grabbed": canRank ? "false" : undefined,
      "aria-roledescription": "sortable finding",
      dataset: { findingId: f.id },
    },
    el("strong", {}, f.title),
    el("div", { class: "meta" }, `${passOf(f)} · by ${authorName(f)}${f.evidence_run_id != null ? " · has evidence" : ""}`));
    if (!canRank) return node;
    node.addEventListener("dragstart", (e) => {
      dragId = f.id;
      e.dataTransfer.setData("text/plain", String(f.id));
      e.dataTransfer.effectAllowed = "move";
      node.classList.add("dragging");
    });
    node.addEventListener("dragend", () => { node.classList.remove("dragging"); dragId = null; });
    node.addEventListener("keydown", (e) => onKey(e, node, f));
    return node;
  }

  function draw() {
    if (grabbed || saving) return; // do not move cards under the reader's hands
    // Redrawing replaces the cards; keep keyboard focus on the same finding.
    const focused = document.activeElement && document.activeElement.classList.contains("rank-card")
      ? document.activeElement.dataset.findingId : null;
    const all = ctx.store.all().filter((f) => f.status !== ctx.config.droppedStatus);
    for (const col of COLUMNS) {
      const items = all.filter((f) => f.severity === col.key);
      lists[col.key].list.replaceChildren(...items.map(card));
      lists[col.key].count.textContent = String(items.length);
    }
    if (focused) box.querySelector(`.rank-card[data-finding-id="${focused}"]`)?.focus();
  }

  function place(node, severity, index) {
    const list = lists[severity].list;
    const others = [...list.children].filter((c) => c !== node);
    list.insertBefore(node, others[index] || null);
  }

  function onKey(e, node, f) {
    const keys = ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight"];
    if (e.key === " " || e.key === "Enter") {
      e.preventDefault();
      if (!grabbed) {
        const sev = node.parentElement.dataset.severity;
        grabbed = { id: f.id, fromSeverity: sev, fromIndex: [...node.parentElement.children].indexOf(node) };
        node.setAttribute("aria-grabbed", "true");
        live.textContent = `Picked up "${f.title}". Arrows move it, Space drops it, Escape cancels.`;
      } else {
        const sev = node.parentElement.dataset.severity;
        const index = [...node.parentElement.children].indexOf(node);
        node.setAttribute("aria-grabbed", "false");
        grabbed = null;
        save(f.id, sev, index, node);
      }
      return;
    }
    if (!grabbed) return;
    if (e.key === "Escape") {
      e.preventDefault();
      place(node, grabbed.fromSeverity, grabbed.fromIndex);
      node.setAttribute("aria-grabbed", "false");
      grabbed = null;
      live.textContent = "Move cancelled.";
      node.focus();
      draw();
      return;
    }
    if (!keys.includes(e.key)) return;
    e.preventDefault();
    const sev = node.parentElement.dataset.severity;
    const index = [...node.parentElement.children].indexOf(node);
    const ci = COLUMNS.findIndex((c) => c.key === sev);
    if (e.key === "ArrowUp" && index > 0) place(node, sev, index - 1);
    else if (e.key === "ArrowDown") place(node, sev, index + 1);
    else if (e.key === "ArrowLeft" && ci > 0) place(node, COLUMNS[ci - 1].key, Math.min(index, lists[COLUMNS[ci - 1].key].list.children.length));
    else if (e.key === "ArrowRight" && ci < COLUMNS.length - 1) place(node, COLUMNS[ci + 1].key, Math.min(index, lists[COLUMNS[ci + 1].key].list.children.length));
    node.focus();
    const now = node.parentElement.dataset.severity;
    const label = COLUMNS.find((c) => c.key === now).label;
    live.textContent = `${label}, position ${[...node.parentElement.children].indexOf(node) + 1} of ${node.parentElement.children.length}.`;
  }

  async function save(id, severity, index, focusNode = null) {
    const ids = ctx.store.all()
      .filter((f) => f.severity === severity && f.id !== id && f.status !== ctx.config.droppedStatus)
      .map((f) => f.id);
    ids.splice(Math.min(index, ids.length), 0, id);
    saving = true;
    try {
      const ordered = await api(ctx.config.urls.reorder, { method: "POST", body: { severity, ids } });
      saving = false;
      for (const f of ordered) ctx.updateFinding(f);
      const label = COLUMNS.find((c) => c.key === severity).label;
      live.textContent = `Saved: "${ctx.store.get(id)?.title}" is ${label} #${ids.indexOf(id) + 1}.`;
    } catch (err) {
      saving = false;
      live.textContent = `Not saved: ${err.message}`;
    }
    draw();
    const again = box.querySelector(`.rank-card[data-finding-id="${id}"]`);
    if (focusNode && again) again.focus();
  }

  box.replaceChildren(
    el("p", { class: "muted rank-help" }, canRank
      ? "Drag cards between and within the columns, or focus a card and press Space to pick it up, the arrow keys to move it and Space to drop it. Changes save at once for everyone."
      : "The session's owner orders the findings; you see their changes live."),
    board, live);
  draw();
  ctx.events.addEventListener("findings", draw);
}

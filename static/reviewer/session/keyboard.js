// Keyboard shortcuts on the session page: j/k move between the findings of the
// pass on screen, r replies, e edits, x marks fixed, p publishes the review, ?
// shows the list. Keys typed into a field, or with Ctrl/Alt/Meta, are left alone.
//
// x and p call ctx.markFixed(finding) and ctx.publishReview(), which the
// publishing tools provide (publish.js): an author marks the finding fixed, a
// reviewer gets the publish form with its verdict focused. Without them x
// marks the reader's own finding resolved and p says there is nothing to publish.

import { el } from "../lib/api.js";

const KEYS = [
  ["j", "Next finding"],
  ["k", "Previous finding"],
  ["r", "Reply to the selected finding"],
  ["e", "Edit the selected finding"],
  ["x", "Mark the selected finding fixed"],
  ["p", "Publish the review"],
  ["?", "Show or hide this list"],
  ["Esc", "Close this list"],
];

function typing(target) {
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]"));
}

function helpDialog() {
  const dialog = el("dialog", { class: "kbd-help", id: "kbd-help", "aria-labelledby": "kbd-help-h" },
    el("h2", { id: "kbd-help-h" }, "Keyboard shortcuts"),
    el("dl", {}, KEYS.flatMap(([key, what]) => [el("dt", {}, el("kbd", {}, key)), el("dd", {}, what)])),
    el("p", { class: "muted" }, "Keys typed into a field are not shortcuts."),
    el("form", { method: "dialog" }, el("button", { type: "submit" }, "Close")));
  document.body.append(dialog);
  return dialog;
}

export function initKeyboard(ctx) {
  const { config } = ctx;
  const dialog = helpDialog();
  let selectedId = null;

  const items = () => [...document.querySelectorAll(".pass-panel:not([hidden]) .finding-item[data-finding-id]")];
  const selectedItem = () => items().find((item) => Number(item.dataset.findingId) === selectedId) || null;
  const selectedFinding = () => (selectedId === null ? null : ctx.store.get(selectedId));

  function mark() {
    for (const node of document.querySelectorAll(".finding-item.kbd-selected")) node.classList.remove("kbd-selected");
    const item = selectedItem();
    if (item) {
      item.classList.add("kbd-selected");
      item.setAttribute("aria-current", "true");
    }
    return item;
  }

  function move(step) {
    const list = items();
    if (!list.length) {
      ctx.say("No findings in this pass yet.");
      return;
    }
    const at = list.findIndex((item) => Number(item.dataset.findingId) === selectedId);
    const next = at < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, at + step));
    selectedId = Number(list[next].dataset.findingId);
    for (const node of document.querySelectorAll("[aria-current]")) node.removeAttribute("aria-current");
    const item = mark();
    item?.scrollIntoView({ block: "nearest" });
    const f = selectedFinding();
    if (f) {
      ctx.markActive?.(f.id);
      ctx.say(`Finding ${next + 1} of ${list.length}: ${f.title}`);
    }
  }

  function withSelection(fn) {
    const f = selectedFinding();
    if (!f) {
      ctx.say("Select a finding first: j and k move between findings.");
      return;
    }
    fn(f, selectedItem());
  }

  function reply(f, item) {
    if (!item) return;
    const toggle = item.querySelector("button[aria-expanded]");
    if (toggle && toggle.getAttribute("aria-expanded") !== "true") toggle.click();
    // The thread is drawn by the click; its text box follows at once.
    const box = selectedItem()?.querySelector(".thread textarea");
    box?.focus();
  }

  async function markFixed(f) {
    if (typeof ctx.markFixed === "function") return ctx.markFixed(f);
    const resolved = config.findingStatuses.find((s) => s.key === config.resolvedStatus);
    if (!resolved) {
      ctx.say("Marking findings fixed is not available on this page.");
      return undefined;
    }
    if (f.author !== config.user.username) {
      ctx.say(`Only ${f.author}, who filed "${f.title}", changes its status.`);
      return undefined;
    }
    await ctx.onFindingAction("status", f, resolved.key);
    ctx.say(`Marked "${f.title}" ${resolved.label.toLowerCase()}.`);
    return undefined;
  }

  function publish() {
    if (typeof ctx.publishReview === "function") return ctx.publishReview();
    ctx.say("Findings in this session are filed as you write them: there is no draft review to publish.");
    return undefined;
  }

  function toggleHelp() {
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }
  document.getElementById("kbd-help-open")?.addEventListener("click", toggleHelp);

  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "?" && !typing(e.target)) {
      e.preventDefault();
      toggleHelp();
      return;
    }
    if (dialog.open || typing(e.target)) return;
    const actions = {
      j: () => move(1),
      k: () => move(-1),
      r: () => withSelection(reply),
      e: () => withSelection((f) => ctx.editFinding(f)),
      x: () => withSelection((f) => markFixed(f)),
      p: () => publish(),
    };
    const action = actions[e.key];
    if (!action) return;
    e.preventDefault();
    action();
  });

  // A click on a finding (outside its controls) selects it, as j and k do, so
  // the keys that act on the selection act on the finding the mouse chose.
  document.addEventListener("click", (e) => {
    if (!(e.target instanceof Element)) return;
    if (e.target.closest("button, a, input, select, textarea, label, summary")) return;
    const item = e.target.closest(".pass-panel .finding-item[data-finding-id]");
    if (!item) return;
    selectedId = Number(item.dataset.findingId);
    for (const node of document.querySelectorAll("[aria-current]")) node.removeAttribute("aria-current");
    mark();
  });

  // Lists are redrawn whenever findings change; the selection is drawn again.
  ctx.events.addEventListener("findings", mark);
  ctx.events.addEventListener("pass-viewed", () => { selectedId = null; mark(); });
  return { move, toggleHelp };
}

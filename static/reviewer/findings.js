// Findings on the client: one store shared by every panel, and how a finding
// is drawn in a list.

import { el } from "./api.js";

/** Who wrote a finding (the API gives the author's username). */
export function authorName(f) {
  if (f.author && typeof f.author === "object") return f.author.username;
  return f.author != null ? String(f.author) : "someone";
}

/** The pass a finding belongs to (the API calls the field "pass"). */
export function passOf(f) {
  return f.pass ?? f.review_pass;
}

const SEVERITY_ORDER = { fix_now: 0, clarify: 1, mention: 2 };

/** Findings keyed by id; emits "change" on the given target whenever it changes. */
export class FindingStore extends EventTarget {
  constructor() {
    super();
    this.byId = new Map();
  }

  all() {
    return [...this.byId.values()].sort(
      (a, b) => (SEVERITY_ORDER[a.severity] ?? 9) - (SEVERITY_ORDER[b.severity] ?? 9)
        || (a.position ?? 0) - (b.position ?? 0) || a.id - b.id,
    );
  }

  get(id) { return this.byId.get(Number(id)); }

  /** Keep the newer of two versions of a finding (events may arrive out of order). */
  upsert(f, { quiet = false } = {}) {
    const old = this.byId.get(f.id);
    if (old && (old.version ?? 0) > (f.version ?? 0)) return false;
    this.byId.set(f.id, f);
    if (!quiet) this.dispatchEvent(new CustomEvent("change", { detail: { id: f.id } }));
    return true;
  }

  remove(id, { quiet = false } = {}) {
    const had = this.byId.delete(Number(id));
    if (had && !quiet) this.dispatchEvent(new CustomEvent("change", { detail: { id } }));
    return had;
  }

  replaceAll(list) {
    this.byId.clear();
    for (const f of list) this.byId.set(f.id, f);
    this.dispatchEvent(new CustomEvent("change", { detail: {} }));
  }
}

function severityLabel(key) {
  return { fix_now: "Fix now", clarify: "Clarify", mention: "Mention" }[key] || key;
}

/** One finding as a list item; actions get (action, finding). */
export function findingItem(f, { onAction, username }) {
  const body = el("div", { class: "body" });
  if (f.body_html) body.innerHTML = f.body_html; // sanitized by the server
  else if (f.body) body.append(el("p", { text: f.body }));
  const evidence = f.evidence_run_id != null
    ? el("p", { class: "evidence" },
      `Evidence: run ${f.evidence_run_id}`,
      f.evidence_t_from_s != null ? `, ${Number(f.evidence_t_from_s).toFixed(0)}–${Number(f.evidence_t_to_s).toFixed(0)} s` : "",
      f.evidence_metric ? `, ${f.evidence_metric} ` : " ",
      el("button", { type: "button", class: "link", onclick: () => onAction("show-evidence", f) }, "show"))
    : null;
  const actions = el("div", { class: "row" },
    f.anchor_exact && !f.orphaned ? el("button", { type: "button", onclick: () => onAction("show", f) }, "Show in doc") : null,
    authorName(f) === username
      ? el("button", { type: "button", class: "danger", onclick: () => onAction("delete", f) }, "Delete") : null);
  return el("li", { class: "finding-item", id: `finding-${f.id}`, dataset: { findingId: f.id } },
    el("div", { class: "meta" },
      el("span", { class: `badge ${f.severity}` }, severityLabel(f.severity)),
      el("span", {}, passOf(f)),
      f.trace_hop ? el("span", {}, `hop: ${f.trace_hop}`) : null,
      el("span", {}, `by ${authorName(f)}`),
      f.status && f.status !== "open" ? el("span", {}, f.status) : null,
      f.orphaned ? el("span", { class: "error" }, "orphaned") : null),
    el("strong", { class: "title" }, f.title),
    f.anchor_exact ? el("blockquote", {}, f.anchor_exact) : null,
    body, evidence, actions);
}

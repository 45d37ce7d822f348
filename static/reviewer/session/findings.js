// Findings on the client: one store shared by every panel, and how a finding
// is drawn in a list.

import { api, apiList, el } from "../lib/api.js";
import { config, labelOf } from "../lib/config.js";

/** Who wrote a finding (the API gives the author's username). */
export function authorName(f) {
  if (f.author && typeof f.author === "object") return f.author.username;
  return f.author != null ? String(f.author) : "someone";
}

/** The pass a finding belongs to (the API calls the field "pass"). */
export function passOf(f) {
  return f.pass ?? f.review_pass;
}

// Buckets in the server's order: most urgent first.
const SEVERITY_ORDER = Object.fromEntries(config.severities.map((s, i) => [s.key, i]));

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


// Threads the reader has open, and replies being written, survive re-renders.
const openThreads = new Set();
const drafts = new Map();
// The replies last loaded per finding: a re-rendered thread shows them at once
// while it reads them again, instead of an empty list.
const loadedReplies = new Map();

function thread(f, onError, onReplied) {
  const url = `/api/findings/${f.id}/replies/`;
  const list = el("ul", { class: "replies" });
  const text = el("textarea", { rows: 2, "aria-label": `Reply to ${f.title}` });
  text.value = drafts.get(f.id) || "";
  text.addEventListener("input", () => drafts.set(f.id, text.value));
  const send = el("button", { type: "button" }, "Reply");
  function show(replies) {
    list.replaceChildren(...replies.map((r) => {
      const body = el("div", { class: "body" });
      body.innerHTML = r.body_html; // sanitized by the server
      return el("li", { class: r.draft ? "draft" : "" }, el("span", { class: "meta" }, `${r.author}:`),
        r.draft ? el("span", { class: "badge draft", title: "Only you see it until you publish your review." }, "draft") : null,
        body);
    }));
  }
  if (loadedReplies.has(f.id)) show(loadedReplies.get(f.id));
  async function load() {
    try {
      const replies = await apiList(url);
      loadedReplies.set(f.id, replies);
      show(replies);
    } catch (err) {
      onError(`Could not load replies: ${err.message}`);
    }
  }
  send.addEventListener("click", async () => {
    if (!text.value.trim()) return;
    send.disabled = true;
    try {
      await api(url, { method: "POST", body: { body: text.value } });
      drafts.delete(f.id);
      text.value = "";
      await load();
      onReplied();
    } catch (err) {
      onError(`Could not reply: ${err.message}`);
    } finally {
      send.disabled = false;
    }
  });
  load();
  return el("div", { class: "thread" }, list, text, send);
}

/** Where a thread stands, in one control (a select, its detail and "Apply"), as on
 * a code review: the session's reviewers and the doc's authors resolve a published
 * finding (fixed, with the revision that fixes it, or won't fix, with why) and
 * reopen it; the one who filed it may also withdraw it (dropped). On a draft, or
 * for a reader who cannot resolve, its author alone sets its status. Enter in the
 * detail box applies, as the button does. */
function stateControls(f, { onAction, mine }) {
  const S = config.findingState;
  const byState = !f.draft && config.canResolve;
  if (!byState && !mine) return null;
  const DROPPED = config.droppedStatus;
  const RESOLVED = config.resolvedStatus;
  const OPEN = config.openStatus;
  const resolvedState = f.state === S.FIXED || f.state === S.WONT_FIX;
  let options;
  let current;
  if (byState) {
    const openLabel = f.state === S.REOPENED ? "Reopened" : resolvedState ? "Open (reopen it)" : "Open";
    options = [[S.OPEN, openLabel], [S.FIXED, labelOf(config.findingStates, S.FIXED)],
      [S.WONT_FIX, labelOf(config.findingStates, S.WONT_FIX)]];
    if (f.status === RESOLVED && !resolvedState) options.push([RESOLVED, "Resolved by its author"]);
    if (mine || f.status === DROPPED) options.push([DROPPED, "Dropped (withdrawn)"]);
    current = f.status === DROPPED ? DROPPED : resolvedState ? f.state
      : f.status === RESOLVED ? RESOLVED : S.OPEN;
  } else {
    options = config.findingStatuses.map((s) => [s.key, s.label]);
    current = f.status;
  }
  const choice = el("select", { "aria-label": `State of ${f.title}` },
    options.map(([value, label]) => el("option", { value, selected: value === current }, label)));
  const revision = el("input", { type: "number", min: 1, placeholder: "revision",
    "aria-label": `Revision that fixes ${f.title}`, value: f.fixed_revision ?? "" });
  const reason = el("input", { type: "text", placeholder: "why not", "aria-label": `Why ${f.title} will not be fixed`,
    value: f.state_reason || "" });
  const apply = el("button", { type: "button", class: "apply-state" }, "Apply");
  const sync = () => {
    revision.hidden = !byState || choice.value !== S.FIXED;
    reason.hidden = !byState || choice.value !== S.WONT_FIX;
    const unchanged = choice.value === current
      && (choice.value === S.FIXED ? revision.value === String(f.fixed_revision ?? "")
        : choice.value === S.WONT_FIX ? reason.value === (f.state_reason || "") : true);
    apply.disabled = unchanged;
  };
  async function sendState(body) {
    try {
      onAction("replace", f, await api(config.urls.findingState.replace("{id}", f.id), { method: "POST", body }));
    } catch (err) {
      onAction("error", f, `Could not change the state: ${err.message}`);
    }
  }
  async function run() {
    if (apply.disabled) return;
    apply.disabled = true;
    const target = choice.value;
    if (!byState) return onAction("status", f, target);
    if (target === DROPPED || target === RESOLVED) return onAction("status", f, target);
    if (f.status !== OPEN && mine) await onAction("status", f, OPEN);
    if (target === S.OPEN) {
      if (resolvedState) await sendState({ state: S.REOPENED });
      return undefined;
    }
    return sendState({ state: target,
      ...(target === S.FIXED && revision.value ? { fixed_revision: Number(revision.value) } : {}),
      ...(target === S.WONT_FIX ? { reason: reason.value } : {}) });
  }
  choice.addEventListener("change", sync);
  for (const box of [revision, reason]) {
    box.addEventListener("input", sync);
    box.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); run(); } });
  }
  apply.addEventListener("click", run);
  sync();
  return el("div", { class: "state-box", role: "group", "aria-label": `Where ${f.title} stands` },
    el("span", { class: "muted" }, "State"), choice, revision, reason, apply);
}

function stateBadge(f) {
  if (!f.state || f.state === config.findingState.OPEN) return null;
  let text = labelOf(config.findingStates, f.state);
  const badge = (label) => el("span", { class: `badge state state-${f.state}`, title: f.state_reason || "" }, label);
  if (f.state === config.findingState.FIXED && f.fixed_revision != null) {
    // Fixed in revision n: the diff from the revision before it shows the fix.
    const from = Math.max(1, f.fixed_revision - 1);
    return el("a", { class: "state-diff", href: `${config.urls.diff}?from=${from}&to=${f.fixed_revision}`,
      title: `The changes of revision ${f.fixed_revision}` }, badge(`${text} in r${f.fixed_revision}`));
  }
  return badge(f.state_reason ? `${text}: ${f.state_reason}` : text);
}

/** One finding as a list item; actions get (action, finding, value). */
export function findingItem(f, { onAction, username }) {
  const body = el("div", { class: "body" });
  if (f.body_html) body.innerHTML = f.body_html; // sanitized by the server
  else if (f.body) body.append(el("p", { text: f.body }));
  const evidence = f.evidence_run_id != null
    ? el("p", { class: "evidence" },
      `Evidence: run ${f.evidence_run_id}`,
      f.evidence_compare_run_id != null ? ` against run ${f.evidence_compare_run_id}` : "",
      f.evidence_t_from_s != null ? `, ${Number(f.evidence_t_from_s).toFixed(0)}–${Number(f.evidence_t_to_s).toFixed(0)} s` : "",
      f.evidence_metric ? `, ${f.evidence_metric} ` : " ",
      el("button", { type: "button", class: "link", onclick: () => onAction("show-evidence", f) }, "show"))
    : null;
  const mine = authorName(f) === username;
  const threadBox = el("div");
  const toggle = el("button", { type: "button", "aria-expanded": openThreads.has(f.id) ? "true" : "false" },
    `Replies (${f.reply_count ?? 0})`);
  // A reply of one's own (a draft is announced to nobody) refreshes the count here.
  const refresh = async () => {
    try { onAction("replace", f, await api(`/api/findings/${f.id}/`)); } catch { /* the live event may still come */ }
  };
  const showThread = () => threadBox.replaceChildren(thread(f, (msg) => onAction("error", f, msg), refresh));
  toggle.addEventListener("click", () => {
    const open = !openThreads.has(f.id);
    if (open) { openThreads.add(f.id); showThread(); } else { openThreads.delete(f.id); threadBox.replaceChildren(); }
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
  if (openThreads.has(f.id)) showThread();
  // Near-duplicates are offered for merging; a merged finding says where it went.
  const merges = f.merged_into == null
    ? (f.duplicates || []).map((id) => el("button", { type: "button", onclick: () => onAction("merge", f, id) }, `Merge into #${id}`))
    : [];
  const actions = el("div", { class: "row" },
    f.anchor_exact && !f.orphaned ? el("button", { type: "button", onclick: () => onAction("show", f) }, "Show in doc") : null,
    toggle, ...merges,
    mine && f.merged_into == null
      ? el("button", { type: "button", class: "edit", "aria-label": `Edit ${f.title}`, onclick: () => onAction("edit", f) }, "Edit")
      : null,
    mine ? el("button", { type: "button", class: "danger", onclick: () => onAction("delete", f) }, "Delete") : null);
  return el("li", { class: `finding-item${f.draft ? " draft" : ""}${f.merged_into != null ? " merged" : ""}`, dataset: { findingId: f.id } },
    el("div", { class: "meta" },
      f.draft ? el("span", { class: "badge draft", title: "Only you see it until you publish your review." }, "draft") : null,
      el("span", {}, `#${f.id}`),
      el("span", { class: `badge ${f.severity}` }, labelOf(config.severities, f.severity)),
      stateBadge(f),
      f.verdict ? el("span", { class: `verdict verdict-${f.verdict}` }, labelOf(config.verdicts, f.verdict)) : null,
      el("span", {}, passOf(f)),
      f.trace_hop ? el("span", {}, `hop: ${f.trace_hop}`) : null,
      el("span", {}, `by ${authorName(f)}`),
      f.status && f.status !== config.openStatus ? el("span", {}, f.status) : null,
      f.orphaned ? el("span", { class: "error", title: "The quote is not in the doc's latest revision." }, "orphaned quote") : null,
      (f.duplicates || []).length && f.merged_into == null
        ? el("span", { class: "duplicate", title: "Same pass and the same quote, or the same title and text." },
          `possible duplicate of ${f.duplicates.map((id) => `#${id}`).join(", ")}`) : null,
      f.merged_into != null ? el("span", {}, `merged into #${f.merged_into}`) : null),
    el("strong", { class: "title" }, f.title),
    f.anchor_exact ? el("blockquote", {}, f.anchor_exact) : null,
    body, evidence, actions, stateControls(f, { onAction, mine }), threadBox);
}

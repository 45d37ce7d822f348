// The session page: wires the doc, the passes, the findings form and the live
// session socket together. Each pass's tools live in their own module and are
// started the first time their pass is shown.

import { api, apiList, describeError, fill } from "../lib/api.js";
import { config } from "../lib/config.js";
import { drawHighlights, selectionIn } from "../session/doc.js";
import { FindingStore, authorName, findingItem, passOf } from "../session/findings.js";
import { initKeyboard } from "../session/keyboard.js";
import { initPasses } from "../session/passes.js";
import { connectSession } from "../session/presence.js";
import { initReviewDocument } from "../session/review_document.js";
import { initPublish } from "../session/publish.js";
import { initReanchoring } from "../session/reanchoring.js";

const store = new FindingStore();
const docBody = document.getElementById("doc-body");
const originalDocHtml = docBody.innerHTML;
const statusLine = document.getElementById("live-status");

// Changes from other people wait here while the reader is selecting text or
// writing a finding, so the doc under their cursor does not move.
const pending = [];
let activeFindingId = null;
let mouseDownInDoc = false;

const ctx = {
  config,
  store,
  events: new EventTarget(),
  openFindingForm,
  showPass: null, // set by initPasses
  say(text) { statusLine.textContent = text; },
  updateFinding,
  findingsForPass: (key) => store.all().filter((f) => passOf(f) === key),
};
window.reviewSession = ctx; // handy for debugging from the console

// ---------------------------------------------------------------- rendering

function selectionInProgress() {
  return mouseDownInDoc || !document.getElementById("finding-form").hidden || selectionIn(docBody) !== null;
}

function renderDoc() {
  const findings = store.all().filter((f) => f.status !== config.droppedStatus && f.merged_into == null);
  const unplaced = drawHighlights(docBody, originalDocHtml, findings,
    { revision: config.docRevision, map: config.docMap }, activate);
  // A finding moved to a newer revision than this page shows: the doc was revised meanwhile.
  if (unplaced.some((f) => f.revision != null && config.docRevision != null && f.revision > config.docRevision)) {
    ctx.say("The doc was revised since this page loaded; reload it to see every finding in place.");
  }
  const orphanBox = document.getElementById("orphans");
  const list = document.getElementById("orphan-list");
  list.replaceChildren(...unplaced.map((f) => findingItem(f, { onAction, username: config.user.username })));
  orphanBox.hidden = unplaced.length === 0;
  if (activeFindingId !== null) markActive(activeFindingId, false);
}

/** Near-duplicates both ways: a finding filed later names the earlier one, not the reverse. */
function withDuplicates(items) {
  const more = new Map();
  for (const f of store.all()) {
    if (f.merged_into != null) continue;
    for (const id of f.duplicates || []) more.set(id, [...(more.get(id) || []), f.id]);
  }
  return items.map((f) => {
    if (f.merged_into != null || !more.has(f.id)) return f;
    const live = (id) => store.get(id) && store.get(id).merged_into == null;
    return { ...f, duplicates: [...new Set([...(f.duplicates || []), ...more.get(f.id)])].filter(live).sort((a, b) => a - b) };
  });
}

function renderLists() {
  for (const pass of config.passes) {
    const list = document.querySelector(`[data-findings-for="${pass.key}"]`);
    const items = withDuplicates(ctx.findingsForPass(pass.key));
    list.replaceChildren(...items.map((f) => findingItem(f, { onAction, username: config.user.username })));
    const count = document.querySelector(`[data-count-for="${pass.key}"]`);
    count.textContent = items.length ? `(${items.length})` : "";
  }
}

function renderAll() {
  renderDoc();
  renderLists();
  ctx.events.dispatchEvent(new CustomEvent("findings"));
}

function markActive(id, scroll = true) {
  activeFindingId = Number(id);
  for (const node of document.querySelectorAll(".active[data-finding-id]")) node.classList.remove("active");
  for (const node of document.querySelectorAll(`[data-finding-id="${id}"]`)) node.classList.add("active");
  if (scroll) {
    const mark = docBody.querySelector(`mark[data-finding-id="${id}"]`);
    if (mark) mark.scrollIntoView({ block: "center", behavior: "smooth" });
  }
}

function activate(id) {
  const f = store.get(id);
  if (!f) return;
  markActive(id, false);
  ctx.showPass(passOf(f));
  const item = document.querySelector(`.pass-panel:not([hidden]) .finding-item[data-finding-id="${id}"]`);
  if (item) item.scrollIntoView({ block: "nearest", behavior: "smooth" });
}

async function onAction(action, f, value) {
  if (action === "show") markActive(f.id);
  else if (action === "edit") editFinding(f);
  else if (action === "replace") store.upsert(value);
  else if (action === "error") ctx.say(value);
  else if (action === "merge") {
    const into = store.get(value);
    if (!window.confirm(`Merge "${f.title}" into "${into ? into.title : `finding ${value}`}"? Its replies move there; it stays, marked as merged.`)) return;
    try {
      store.upsert(await api(fill(config.urls.merge, f.id), { method: "POST", body: { into: value, version: f.version } }));
      store.upsert(await api(fill(config.urls.finding, f.id)));
      ctx.say(`Merged "${f.title}" into finding ${value}.`);
    } catch (err) {
      ctx.say(`Could not merge: ${err.message}`);
    }
  }
  else if (action === "status") {
    try {
      store.upsert(await api(fill(config.urls.finding, f.id), { method: "PATCH", body: { status: value, version: f.version } }));
    } catch (err) {
      if (err.status === 409) store.upsert(await api(fill(config.urls.finding, f.id)));
      ctx.say(`Could not change the status: ${err.message}`);
      renderAll();
    }
  }
  else if (action === "show-evidence") {
    ctx.showPass(config.pass.BREAK);
    ctx.events.dispatchEvent(new CustomEvent("show-evidence", { detail: f }));
  } else if (action === "delete") {
    if (!window.confirm(`Delete the finding "${f.title}"?`)) return;
    try {
      await api(`${fill(config.urls.finding, f.id)}?version=${f.version}`, { method: "DELETE" });
      store.remove(f.id);
    } catch (err) {
      if (err.status === 409) store.upsert(await api(fill(config.urls.finding, f.id)));
      ctx.say(err.status === 409
        ? "The finding changed meanwhile; check it and delete again if you still mean to."
        : `Could not delete: ${err.message}`);
    }
  }
}

// ------------------------------------------------------------ live updates

function applyPending() {
  for (const change of pending.splice(0)) {
    if (change.kind === "deleted") store.remove(change.finding.id, { quiet: true });
    else store.upsert(change.finding, { quiet: true });
  }
  document.getElementById("new-banner").hidden = true;
  renderAll();
}

function updateBanner() {
  const banner = document.getElementById("new-banner");
  const created = pending.filter((c) => c.kind === "created").length;
  const other = pending.length - created;
  const parts = [];
  if (created) parts.push(`${created} new`);
  if (other) parts.push(`${other} changed`);
  document.getElementById("new-count").textContent = parts.join(", ");
  banner.hidden = pending.length === 0;
}

function onFindingEvent(kind, finding) {
  const mine = kind === "created" && authorName(finding) === config.user.username && store.get(finding.id);
  if (mine) { store.upsert(finding); return; }
  if (selectionInProgress()) {
    pending.push({ kind, finding });
    updateBanner();
    return;
  }
  if (kind === "deleted") store.remove(finding.id);
  else store.upsert(finding);
}

/** A reviewer published: their findings arrive together, with the verdict. */
function onReviewPublished(review, findings) {
  for (const finding of findings) onFindingEvent("created", finding);
  ctx.events.dispatchEvent(new CustomEvent("review-published", { detail: review }));
}

/** Apply a finding the page itself changed (rank moves, evidence) at once. */
function updateFinding(f) {
  store.upsert(f);
}

store.addEventListener("change", renderAll);
ctx.onFindingAction = (...args) => onAction(...args);

// ------------------------------------------------------------ finding form

const form = document.getElementById("finding-form");
const fields = {
  quote: document.getElementById("ff-quote"),
  pass: document.getElementById("ff-pass"),
  severity: document.getElementById("ff-severity"),
  title: document.getElementById("ff-title"),
  body: document.getElementById("ff-body"),
  hop: document.getElementById("ff-hop"),
  evidence: document.getElementById("ff-evidence"),
  error: document.getElementById("ff-error"),
  submit: document.getElementById("ff-submit"),
};
// The reader's selection (rendered text, context, position) the form was opened with.
let formSelection = null;
let formEvidence = null;
// The finding the form changes (null: the form files a new one).
let editingFinding = null;
const formHeading = document.getElementById("finding-form-h");

function openFindingForm(...args) {
  // The doc's authors answer findings; they do not file them.
  if (!config.canPublish) return;
  openFindingFormFor(...args);
}

function openFindingFormFor({ selection = null, pass = null, hop = "", evidence = null, title = "", body = "", severity = null, editing = null } = {}) {
  editingFinding = editing;
  formHeading.textContent = editing ? `Edit finding: ${editing.title}` : "New finding";
  fields.submit.textContent = editing ? "Save changes" : "File finding";
  formSelection = selection;
  const formQuote = selection ? selection.quote : editing ? editing.anchor_exact || "" : "";
  formEvidence = evidence;
  fields.quote.value = formQuote;
  fields.pass.value = pass || ctx.currentView || config.currentPass;
  fields.hop.value = hop || "";
  fields.title.value = title;
  fields.body.value = body;
  if (severity) fields.severity.value = severity;
  fields.evidence.hidden = !evidence;
  fields.evidence.textContent = evidence
    ? `Evidence: ${evidence.note || `run ${evidence.evidence_run_id}`}, ${evidence.evidence_t_from_s.toFixed(0)}–${evidence.evidence_t_to_s.toFixed(0)} s, ${evidence.evidence_metric}` : "";
  fields.error.textContent = "";
  form.hidden = false;
  form.scrollIntoView({ block: "nearest" });
  fields.title.focus({ preventScroll: true });
}

/** Open the form on an existing finding (the reader's own). */
function editFinding(f) {
  if (authorName(f) !== config.user.username) {
    ctx.say(`Only ${authorName(f)}, who filed "${f.title}", edits it.`);
    return;
  }
  openFindingForm({ editing: f, pass: passOf(f), hop: f.trace_hop, title: f.title, body: f.body, severity: f.severity });
}
ctx.editFinding = editFinding;
ctx.markActive = (id) => markActive(id);

function closeForm() {
  // Focus must not stay in a hidden field, or the page's shortcuts would take keys for typing.
  if (form.contains(document.activeElement)) document.activeElement.blur();
  form.hidden = true;
  editingFinding = null;
  formSelection = null;
  formEvidence = null;
  if (pending.length && !selectionInProgress()) applyPending();
}

/** The finding's evidence fields of the form's evidence (without the text it shows). */
function evidenceFields(evidence) {
  if (!evidence) return {};
  const { note: _note, ...fieldsOnly } = evidence;
  return fieldsOnly;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!fields.title.value.trim()) {
    fields.error.textContent = "title: give the finding a short title.";
    fields.title.focus();
    return;
  }
  // The server places the quote: the selection as made, or a quote typed or
  // edited in the form on its own (it has no context or position then).
  const quote = fields.quote.value.replace(/\s+/g, " ").trim();
  const selection = !quote ? null : formSelection && formSelection.quote === quote ? formSelection : { quote };
  const payload = {
    pass: fields.pass.value,
    severity: fields.severity.value,
    title: fields.title.value.trim(),
    body: fields.body.value,
    trace_hop: fields.hop.value,
    ...(selection ? { selection } : {}),
    ...evidenceFields(formEvidence),
  };
  fields.submit.disabled = true;
  if (editingFinding) {
    const editing = editingFinding;
    const { selection: _selection, ...changes } = payload;
    // The quote is placed again only when it was changed in the form.
    if (quote !== (editing.anchor_exact || "").replace(/\s+/g, " ").trim()) {
      if (quote) changes.selection = { quote };
      else Object.assign(changes, { anchor_exact: "", anchor_start: null, anchor_end: null });
    }
    try {
      const saved = await api(fill(config.urls.finding, editing.id), { method: "PATCH", body: { ...changes, version: editing.version } });
      store.upsert(saved, { quiet: true });
      closeForm();
      renderAll();
      markActive(saved.id, false);
      ctx.say(`Saved "${saved.title}".`);
    } catch (err) {
      if (err.status === 409) store.upsert(await api(fill(config.urls.finding, editing.id)));
      fields.error.textContent = err.status === 409
        ? "The finding was changed meanwhile; its current text is in the list. Edit it again."
        : err.message || describeError(0, null);
    } finally {
      fields.submit.disabled = false;
    }
    return;
  }
  try {
    const created = await api(config.urls.findings, { method: "POST", body: payload });
    store.upsert(created, { quiet: true });
    window.getSelection()?.removeAllRanges();
    closeForm();
    renderAll();
    markActive(created.id, false);
    ctx.say(`Filed "${created.title}".`);
  } catch (err) {
    fields.error.textContent = err.message || describeError(0, null);
  } finally {
    fields.submit.disabled = false;
  }
});

document.getElementById("ff-cancel").addEventListener("click", () => {
  closeForm();
});
form.addEventListener("keydown", (e) => {
  if (e.key === "Escape") closeForm();
});

for (const button of document.querySelectorAll("button.new-finding")) {
  button.addEventListener("click", () => openFindingForm({ pass: button.dataset.pass }));
}

/** Open the form on a quote picked in the doc. An open form keeps what it holds
 * (the finding it edits, its evidence, pass and text): only its quote changes. */
function quoteInForm(picked) {
  if (form.hidden) {
    openFindingForm({ selection: picked });
    return;
  }
  openFindingForm({
    selection: picked, editing: editingFinding, evidence: formEvidence,
    pass: fields.pass.value, hop: fields.hop.value, title: fields.title.value,
    body: fields.body.value, severity: fields.severity.value,
  });
}

// A finished selection inside the doc opens the form with the quote.
docBody.addEventListener("mousedown", () => { mouseDownInDoc = true; });
document.addEventListener("mouseup", () => {
  if (!mouseDownInDoc) return;
  mouseDownInDoc = false;
  const picked = selectionIn(docBody);
  if (picked) quoteInForm(picked);
});
// Keyboard selections (caret browsing, shift+arrows) are offered on Enter.
docBody.addEventListener("keyup", (e) => {
  if (e.key !== "Enter") return;
  const picked = selectionIn(docBody);
  if (picked) quoteInForm(picked);
});
document.getElementById("apply-new").addEventListener("click", applyPending);

// ------------------------------------------------------------------ start

async function loadFindings() {
  try {
    store.replaceAll(await apiList(config.urls.findings));
  } catch (err) {
    ctx.say(`Could not load findings: ${err.message}`);
  }
}

ctx.reloadFindings = loadFindings;
initPasses(ctx);
initReviewDocument(ctx);
initReanchoring(ctx, document.getElementById("reanchoring"));
initKeyboard(ctx);
initPublish(ctx);
connectSession(ctx, {
  onFinding: onFindingEvent,
  onReview: onReviewPublished,
  onReconnect: loadFindings,
});
// A link to one finding (an inbox item: #finding-<id>) opens its pass and marks it.
const linked = /^#finding-(\d+)$/.exec(location.hash);
loadFindings().then(() => { if (linked && store.get(linked[1])) { activate(linked[1]); markActive(linked[1]); } });

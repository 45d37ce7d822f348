// The fleet config editor: a form of every key the emulator reads beside the raw
// TOML. The form is drawn from the server's catalog of keys (the check's `form`:
// groups of fields, each with its label, unit, value as written, the value used
// when left out, and its choices), so a new key appears without new markup. A
// form change is sent as an edit of the TOML as written (POST /api/fleets/check/
// with `edits`), which keeps the reviewer's comments; the TOML pane is checked as
// typed. The emulator's first problem is shown next to the field whose key path
// it names. Each figure carries its provenance mark: from the doc (with its
// words), measured (with what measured it) or assumed. Saving makes a new version.

import { api, el } from "../lib/api.js";
import { config } from "../lib/config.js";

const CHECK_DELAY_MS = 350;

const state = {
  provenance: { ...(config.provenance || {}) }, // key path -> {source: "doc", quote} | {source: "measured", note} | {source: "assumed"}
  docSelection: "", // the words last selected in the doc pane
  form: null, // the server's groups for the TOML as last checked
  toml: config.toml, // the TOML as last checked (valid or not)
  edits: [], // form changes not yet applied to state.toml
  valid: false,
  seq: 0, // checks answer out of order; only the latest counts
  timer: null,
  openGroups: new Set(), // the groups the reader opened or closed stay so across redraws
  closedGroups: new Set(),
};

const $ = (id) => document.getElementById(id);
const status = (text) => { $("fe-status").textContent = text; };

// --- values ------------------------------------------------------------------

/** What a box means: empty leaves the key out (the emulator's value then stands), numbers are numbers. */
function parseValue(text, kind) {
  const t = text.trim();
  if (t === "") return undefined;
  if (kind === "list") return t.split(/[\s,]+/).filter(Boolean);
  if (kind === "bool") return t === "true";
  if (kind === "select" || kind === "text" && !/^[-+0-9.eE_]+$/.test(t)) return t;
  const n = Number(t.replace(/_/g, ""));
  return Number.isFinite(n) && /^[-+0-9.eE_]+$/.test(t) ? n : t; // leave the rest for the emulator to name
}

function showValue(value) {
  if (value == null) return "";
  if (Array.isArray(value)) return value.join(", ");
  return String(value);
}

// --- edits ----------------------------------------------------------------------

/** Queue a change to the TOML; a later value of the same key replaces an earlier one. */
function edit(change, { now = false } = {}) {
  const last = state.edits[state.edits.length - 1];
  if (last && (change.op === "set" || change.op === "unset") && (last.op === "set" || last.op === "unset")
      && last.path === change.path) state.edits.pop();
  state.edits.push(change);
  scheduleCheck({ form: true }, now ? 0 : CHECK_DELAY_MS);
}

function setField(path, value) {
  edit(value === undefined ? { op: "unset", path } : { op: "set", path, value });
}

// --- the form -------------------------------------------------------------------

const fieldId = (path) => `fe-${path.replace(/[^a-zA-Z0-9_-]/g, "_")}`;

/** One labelled input bound to a key path, from the catalog's field. */
function field(f) {
  const id = fieldId(f.path);
  const used = showValue(f.used);
  let input;
  if (f.kind === "select" || f.kind === "bool" || f.kind === "fault-action") {
    const opts = [...(f.options || [])];
    const current = f.value == null ? "" : String(f.value);
    if (current && !opts.includes(current)) opts.push(current);
    const blank = f.kind === "fault-action" ? [] : [el("option", { value: "" },
      f.required ? "(choose)" : used ? `(left out: ${used})` : "(none)")];
    input = el("select", { id, dataset: { path: f.path, kind: f.kind }, "aria-describedby": `${id}-error` },
      blank.concat(opts.map((o) => el("option", { value: o, selected: current === o }, o))));
    input.value = current;
  } else {
    input = el("input", { type: "text", id, value: showValue(f.value),
      placeholder: f.value == null && used ? `left out: ${used}` : f.required ? "required" : "",
      inputmode: f.kind === "number" ? "decimal" : null, dataset: { path: f.path, kind: f.kind },
      "aria-describedby": `${id}-error` });
  }
  if (f.kind === "fault-action") {
    input.addEventListener("change", () => {
      const target = document.getElementById(fieldId(f.target));
      const value = target ? target.value.trim() : "";
      edit({ op: "unset", path: f.target });
      edit({ op: "set", path: `${f.path}.${input.value}`, value: value || "host:0" }, { now: true });
      state.rebuildNext = true;
    });
  } else {
    input.addEventListener(input.tagName === "SELECT" ? "change" : "input",
      () => setField(f.path, parseValue(input.value, f.kind)));
  }
  const unit = f.unit ? el("span", { class: "unit" }, ` (${f.unit})`) : null;
  return el("div", { class: f.kind === "list" ? "fe-field wide" : "fe-field", dataset: { path: f.path } },
    el("label", { for: id }, f.label, unit),
    input,
    f.kind === "fault-action" ? null : provenanceControl(f),
    el("p", { class: "field-error", id: `${id}-error`, role: "alert", hidden: true }));
}

// --- provenance: from the doc (with its words), measured (with what measured it), or assumed --

const SOURCE_LABELS = { doc: "from the doc", measured: "measured", assumed: "assumed" };

function provenanceControl(f) {
  const path = f.path;
  const mark = state.provenance[path];
  const source = mark ? mark.source : "";
  const box = el("div", { class: "fe-prov", dataset: { source } });
  // Unmarked: a key the config sets, or the emulator's default (an assumption too).
  const unmarked = f.value == null ? "default (assumed)" : "not marked";
  const select = el("select", { "aria-label": `Where ${path} comes from` },
    [el("option", { value: "", selected: !source }, unmarked)].concat(
      Object.entries(SOURCE_LABELS).map(([value, text]) => el("option", { value, selected: value === source }, text))));
  const quote = el("span", { class: "quote" }, mark && mark.quote ? `“${mark.quote}”` : "");
  const attach = el("button", { type: "button", hidden: source !== "doc", title: `The doc's words ${f.label} comes from` },
    "Use the selected words");
  const note = el("input", { type: "text", class: "note", hidden: source !== "measured", value: (mark && mark.note) || "",
    placeholder: "what measured it", "aria-label": `What measured ${path}` });
  note.addEventListener("input", () => {
    state.provenance[path] = { source: "measured", note: note.value.trim() };
    updateSave();
  });
  select.addEventListener("change", () => {
    const before = state.provenance[path] || {};
    if (select.value === "") delete state.provenance[path];
    else if (select.value === "assumed") state.provenance[path] = { source: "assumed" };
    else if (select.value === "measured") state.provenance[path] = { source: "measured", note: note.value.trim() };
    else state.provenance[path] = { source: "doc", quote: before.quote || "" };
    box.dataset.source = select.value;
    attach.hidden = select.value !== "doc";
    note.hidden = select.value !== "measured";
    quote.textContent = select.value === "doc" && state.provenance[path].quote ? `“${state.provenance[path].quote}”` : "";
    if (select.value === "doc" && !state.provenance[path].quote) {
      status(document.getElementById("fe-doc-body") ? "Select the doc's words for it, then press \"Use the selected words\"."
        : "Choose the doc the config describes, to mark figures from it.");
    }
    if (select.value === "measured" && !note.value.trim()) {
      status(`${path}: say what measured it (a calibration fit, a benchmark) in the note.`);
      note.focus();
    }
    updateSave();
  });
  attach.addEventListener("click", () => {
    if (!state.docSelection) { status("Select the words in the doc first."); return; }
    state.provenance[path] = { source: "doc", quote: state.docSelection };
    quote.textContent = `“${state.docSelection}”`;
    status(`${path}: from the doc.`);
    updateSave();
  });
  box.append(select, attach, note, quote);
  return box;
}

function provenanceReady() {
  return Object.values(state.provenance).every((m) => (m.source !== "doc" || m.quote) && (m.source !== "measured" || m.note));
}

function fields(list) {
  return el("div", { class: "fe-fields" }, list.map(field));
}

function removeButton(path, label) {
  return el("button", { type: "button", onclick: () => { edit({ op: "remove", path }, { now: true }); state.rebuildNext = true; } }, label);
}

function newModelName() {
  const names = new Set((state.form.find((g) => g.key === "models")?.items || []).map((i) => i.model));
  let n = names.size + 1;
  while (names.has(`model${n}`)) n++;
  return `model${n}`;
}

function modelName(item) {
  const id = `fe-model-name-${item.model}`;
  const rename = el("input", { type: "text", value: item.model, id, "aria-label": `Name of model ${item.model}` });
  rename.addEventListener("change", () => {
    const to = rename.value.trim();
    if (!to || to === item.model) return;
    edit({ op: "rename", path: `models.${item.model}`, to }, { now: true });
    state.rebuildNext = true;
  });
  return el("div", { class: "fe-field" }, el("label", { for: id }, "name"), rename);
}

const written = (list) => list.some((f) => f.value != null);

/** One group of keys: a fieldset that opens by itself when any of its keys is written. */
function group(g) {
  const items = (g.items || []).map((item) => el("div", { class: "fe-item" },
    el("div", { class: "fe-item-head" }, el("strong", {}, item.title),
      item.remove && (g.key === "models" || g.key === "hosts" || g.key === "faults" || g.key === "kv_tiers" || written(item.fields))
        ? removeButton(item.remove, g.key === "models" || g.key === "hosts" || g.key === "faults" || g.key === "kv_tiers" ? "Remove" : "Remove table")
        : null),
    g.key === "models" ? el("div", { class: "fe-fields" }, modelName(item), ...item.fields.map(field)) : fields(item.fields)));
  const add = g.add ? el("p", {}, el("button", { type: "button", onclick: () => {
    const path = g.add.table.replace("{name}", newModelName());
    edit({ op: "add", path, values: g.add.values }, { now: true });
    state.rebuildNext = true;
  } }, g.add.label)) : null;
  const all = (g.fields || []).concat(...(g.items || []).map((i) => i.fields));
  const setCount = all.filter((f) => f.value != null).length;
  const open = state.closedGroups.has(g.key) ? false : state.openGroups.has(g.key) || setCount > 0 || Boolean(g.add);
  const box = el("details", { class: "fe-group", open, dataset: { group: g.key } },
    el("summary", {}, g.title, el("span", { class: "muted" },
      setCount ? ` · ${setCount} key${setCount === 1 ? "" : "s"} set` : " · the emulator's values")),
    g.fields && g.fields.length ? fields(g.fields) : null,
    ...items, add,
    g.remove ? el("p", {}, removeButton(g.remove, `Remove the ${g.title.toLowerCase()} table`)) : null);
  box.addEventListener("toggle", () => {
    if (box.open) { state.openGroups.add(g.key); state.closedGroups.delete(g.key); }
    else { state.closedGroups.add(g.key); state.openGroups.delete(g.key); }
  });
  return box;
}

function rebuild() {
  if (!state.form) return;
  const focused = document.activeElement && document.activeElement.id;
  $("fe-sections").replaceChildren(...state.form.map(group));
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
}

/** The values the emulator uses, refreshed in place while the reader types (no redraw). */
function refreshPlaceholders() {
  for (const g of state.form) {
    for (const f of (g.fields || []).concat(...(g.items || []).map((i) => i.fields))) {
      const input = document.getElementById(fieldId(f.path));
      if (input && input.tagName === "INPUT" && f.value == null && f.used != null) input.placeholder = `left out: ${showValue(f.used)}`;
    }
  }
}

/** Whether the check's form has other fields or tables than the one drawn (a table came or went). */
function sameFields(form) {
  const shape = (groups) => groups.map((g) => [g.key, g.remove || "",
    ...(g.fields || []).concat(...(g.items || []).map((i) => i.fields)).map((f) => f.path),
    ...(g.items || []).map((i) => i.remove || "")].join("|")).join("||");
  return state.form && shape(form) === shape(state.form);
}

// --- errors ---------------------------------------------------------------------

function clearErrors() {
  for (const box of document.querySelectorAll(".fe-field.bad")) box.classList.remove("bad");
  for (const p of document.querySelectorAll(".fe-field .field-error")) { p.hidden = true; p.textContent = ""; }
  $("fe-form-error").hidden = true;
  $("fe-toml-error").textContent = "";
}

/** The form field whose key path is the error's, or the nearest one above it. */
function fieldFor(path) {
  let best = null;
  for (const box of document.querySelectorAll(".fe-field[data-path]")) {
    const p = box.dataset.path;
    if (path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`)) {
      if (!best || p.length > best.dataset.path.length) best = box;
    }
  }
  return best;
}

function showError(error, from) {
  clearErrors();
  const box = error.path ? fieldFor(error.path) : null;
  if (box) {
    box.classList.add("bad");
    const details = box.closest("details");
    if (details) details.open = true; // the key at fault is never hidden in a closed group
    const p = box.querySelector(".field-error");
    p.textContent = error.message;
    p.hidden = false;
  } else if (from === "form") {
    $("fe-form-error").textContent = error.message;
    $("fe-form-error").hidden = false;
  }
  $("fe-toml-error").textContent = from === "toml" || !box ? error.message : `The form: ${error.message}`;
}

// --- checking and saving --------------------------------------------------------------

/** Check soon: ``{form: true}`` sends the queued form edits over the TOML as last
 * checked, ``{toml}`` the TOML pane's text as typed. */
function scheduleCheck(body, delay = CHECK_DELAY_MS) {
  state.valid = false;
  updateSave();
  status("Checking…");
  clearTimeout(state.timer);
  state.timer = setTimeout(() => check(body), delay);
}

async function check(body) {
  const seq = ++state.seq;
  const from = body.form ? "form" : "toml";
  const sent = from === "form" ? state.edits.length : 0;
  const request = from === "form" ? { toml: state.toml, edits: state.edits.slice(0, sent) } : { toml: body.toml };
  let result;
  try {
    result = await api(config.urls.check, { method: "POST", body: request });
  } catch (err) {
    if (seq !== state.seq) return;
    if (from === "form") {
      // An edit the TOML cannot take: say why next to the key, and draw the form as it was.
      state.edits.splice(0, sent);
      state.rebuildNext = false;
      rebuild();
      const message = (err.data && [].concat(err.data.edits || [])[0]) || err.message;
      const path = String(message).split(":")[0];
      showError({ path, message }, "form");
      status(`Not changed: ${message}`);
    } else {
      status(`Could not check: ${err.message}`);
    }
    return;
  }
  if (seq !== state.seq) return;
  if (from === "form") {
    state.edits.splice(0, sent);
    if (result.toml != null) {
      state.toml = result.toml;
      $("fe-toml").value = result.toml;
    }
  } else {
    state.toml = body.toml;
  }
  state.valid = result.valid;
  if (result.form) {
    const redraw = from === "toml" || state.rebuildNext || !sameFields(result.form);
    state.form = result.form;
    state.rebuildNext = false;
    if (redraw) rebuild(); else refreshPlaceholders();
  } else if (!state.form) {
    $("fe-sections").replaceChildren(el("p", { class: "muted" }, "Fix the TOML to use the form."));
  }
  if (result.valid) {
    clearErrors();
    status(config.fleet && !dirty() ? "No changes." : "Valid: the emulator accepts it.");
  } else {
    showError(result.error, from);
    status("Not saved: fix the error shown.");
  }
  if (state.edits.length) scheduleCheck({ form: true }, 0); // typed while this was checked
  updateSave();
}

let savedToml = config.fleet ? config.toml : null;
let savedName = config.fleet ? config.fleet.name : null;
let savedDoc = config.fleet ? config.fleet.doc : null;
const docValue = () => ($("fe-doc").value ? Number($("fe-doc").value) : null);
let savedProvenance = JSON.stringify(config.provenance || {});
const dirty = () => state.toml !== savedToml || $("fe-name").value.trim() !== savedName || docValue() !== savedDoc
  || JSON.stringify(state.provenance) !== savedProvenance;

function updateSave() {
  const button = $("fe-save");
  const name = $("fe-name").value.trim();
  button.disabled = !state.valid || !name || !provenanceReady() || (config.fleet && !dirty());
  if (config.fleet && !config.fleet.canEdit) button.textContent = "Save as my copy";
}

async function save() {
  const button = $("fe-save");
  button.disabled = true;
  const body = { name: $("fe-name").value.trim(), toml: state.toml, doc: docValue(), provenance: state.provenance };
  try {
    if (config.fleet && config.fleet.canEdit) {
      const saved = await api(config.urls.fleet.replace("{id}", config.fleet.id), { method: "PATCH", body });
      savedToml = state.toml;
      savedName = body.name;
      savedDoc = body.doc;
      savedProvenance = JSON.stringify(body.provenance);
      showVersion(saved.version);
      status(`Saved as version ${saved.version}.`);
    } else {
      const created = await api(config.urls.fleets, { method: "POST", body });
      const next = config.urls.edit.replace("{id}", created.id) + (config.session ? `?session=${config.session.id}` : "");
      status(`Made fleet config "${created.name}".`);
      window.location.assign(next);
      return;
    }
  } catch (err) {
    const data = err.data || {};
    const provenanceError = Object.entries(data).find(([k]) => k.startsWith("provenance"));
    const message = (data.toml && data.toml.join(" ")) || (data.name && `name: ${data.name.join(" ")}`)
      || (provenanceError && [].concat(provenanceError[1]).join(" ")) || err.message;
    status(`Not saved: ${message}`);
    if (provenanceError) {
      // The mark's key path names the field it belongs to.
      showError({ path: provenanceError[0].replace(/^provenance\.?/, ""), message }, "form");
    }
  }
  updateSave();
}

function showVersion(number) {
  $("editor-version").textContent = number ? `· version ${number}` : "";
}

/** The doc pane beside the form, for the doc chosen: shown at once, saved or not. */
async function showDoc(docId) {
  const side = document.querySelector(".editor-side");
  let pane = side.querySelector(".editor-doc");
  if (docId == null) {
    if (pane) pane.remove();
    state.docSelection = "";
    return;
  }
  let doc;
  try {
    doc = await api(config.urls.doc.replace("{id}", docId));
  } catch (err) {
    status(`Could not show the doc: ${err.message}`);
    return;
  }
  if (docValue() !== docId) return; // another doc was chosen meanwhile
  const body = el("article", { class: "doc-body", id: "fe-doc-body" });
  body.innerHTML = doc.body_html; // sanitized by the server
  const fresh = el("section", { class: "card editor-doc", "aria-labelledby": "fe-doc-h" },
    el("h2", { id: "fe-doc-h" }, "The doc: ", el("a", { href: config.urls.docPage.replace("{id}", docId) }, doc.title)),
    el("p", { class: "muted" }, "Mark a figure as from the doc: select the words it comes from here, then press \"Use the selected words\" beside the figure."),
    body);
  if (pane) pane.replaceWith(fresh); else side.prepend(fresh);
  state.docSelection = "";
}

function init() {
  $("fe-name").value = config.fleet ? config.fleet.name : "";
  const docs = $("fe-doc");
  for (const d of config.docs) docs.append(el("option", { value: d.id, selected: d.id === config.docId }, d.title));
  if (config.docId != null && !config.docs.some((d) => d.id === config.docId)) {
    docs.append(el("option", { value: config.docId, selected: true }, `doc ${config.docId}`));
  }
  showVersion(config.fleet && config.fleet.version);
  if (config.session) {
    $("editor-back").replaceChildren(" · ", el("a", { href: config.urls.session.replace("{id}", config.session.id) },
      `Back to ${config.session.title}`));
  }
  if (config.fleet && !config.fleet.canEdit) {
    status(`Only ${config.fleet.owner} saves this config; saving makes a copy that you own.`);
  }
  document.addEventListener("selectionchange", () => {
    const docBody = document.getElementById("fe-doc-body");
    const sel = window.getSelection();
    if (!docBody || !sel || sel.isCollapsed || !sel.rangeCount || !docBody.contains(sel.getRangeAt(0).commonAncestorContainer)) return;
    state.docSelection = sel.toString().replace(/\s+/g, " ").trim();
  });
  const toml = $("fe-toml");
  toml.value = config.toml;
  toml.addEventListener("input", () => { state.edits = []; scheduleCheck({ toml: toml.value }); });
  $("fe-name").addEventListener("input", updateSave);
  docs.addEventListener("change", () => { updateSave(); showDoc(docValue()); });
  $("fe-save").addEventListener("click", save);
  $("fleet-form").addEventListener("submit", (e) => e.preventDefault());
  check({ toml: config.toml }).then(() => {
    if (state.form) applyLayout();
  });
}

/** A layout handed over by the placement pass ("edit this layout first"): its hosts and name. */
function applyLayout() {
  const LAYOUT_KEY = "fleet-editor-layout"; // placement.js writes it
  const raw = sessionStorage.getItem(LAYOUT_KEY);
  if (!raw || config.from == null) return;
  sessionStorage.removeItem(LAYOUT_KEY);
  let layout;
  try { layout = JSON.parse(raw); } catch { return; }
  if (layout.from !== config.from) return;
  const groups = state.form.find((g) => g.key === "hosts")?.items || [];
  for (let i = groups.length - 1; i >= 0; i--) state.edits.push({ op: "remove", path: `hosts[${i}]` });
  for (const host of layout.hosts) state.edits.push({ op: "add", path: "hosts", values: host });
  for (const path of Object.keys(state.provenance)) if (path.startsWith("hosts")) delete state.provenance[path];
  $("fe-name").value = layout.name || "";
  state.rebuildNext = true;
  scheduleCheck({ form: true }, 0);
  status("The layout is in the form; save to make it a new fleet config.");
}

init();

// The fleet config editor: a form for the common keys beside the raw TOML. Both
// are checked as you type by the server (the emulator's own validator, POST
// /api/fleets/check/): a valid form is written back as canonical TOML, a valid
// TOML refills the form, and the first problem is shown next to the field whose
// key path it names. Saving makes a new version of the config.

import { api, el } from "../lib/api.js";
import { config } from "../lib/config.js";

const CHECK_DELAY_MS = 350;
const choices = config.choices;

const state = {
  provenance: { ...(config.provenance || {}) }, // key path -> {source: "doc", quote} | {source: "assumed"}
  docSelection: "", // the words last selected in the doc pane
  scenario: null, // the scenario's JSON form, as the last valid check returned it (then edited by the form)
  toml: config.toml,
  valid: false,
  seq: 0, // checks answer out of order; only the latest counts
  timer: null,
};

const $ = (id) => document.getElementById(id);
const status = (text) => { $("fe-status").textContent = text; };

// --- key paths ---------------------------------------------------------------

/** "hosts[0].workers" -> ["hosts", 0, "workers"]; model names may hold dots only via models.NAME. */
function splitPath(path) {
  const parts = [];
  for (const piece of path.split(".")) {
    const m = piece.match(/^([^[\]]*)((\[\d+\])*)$/);
    if (!m) { parts.push(piece); continue; }
    if (m[1]) parts.push(m[1]);
    for (const idx of m[2].matchAll(/\[(\d+)\]/g)) parts.push(Number(idx[1]));
  }
  return parts;
}

function setAt(root, path, value) {
  const parts = splitPath(path);
  let node = root;
  for (let i = 0; i < parts.length - 1; i++) {
    const key = parts[i];
    if (node[key] == null || typeof node[key] !== "object") node[key] = typeof parts[i + 1] === "number" ? [] : {};
    node = node[key];
  }
  const last = parts[parts.length - 1];
  if (value === undefined) {
    if (Array.isArray(node)) node.splice(last, 1); else delete node[last];
  } else {
    node[last] = value;
  }
}

function getAt(root, path) {
  let node = root;
  for (const key of splitPath(path)) {
    if (node == null) return undefined;
    node = node[key];
  }
  return node;
}

// --- values ------------------------------------------------------------------

/** What a text box means: empty leaves the key out (the emulator's default), numbers are numbers. */
function parseValue(text, kind) {
  const t = text.trim();
  if (t === "") return undefined;
  if (kind === "list") return t.split(/[\s,]+/).filter(Boolean);
  if (kind === "text" || kind === "select") return t;
  if (t === "true") return true;
  if (t === "false") return false;
  const n = Number(t.replace(/_/g, ""));
  return Number.isFinite(n) && /^[-+0-9.eE_]+$/.test(t) ? n : t; // leave the rest for the emulator to name
}

function showValue(value) {
  if (value == null) return "";
  if (Array.isArray(value)) return value.join(", ");
  return String(value);
}

// --- the form -------------------------------------------------------------------

/** One labelled input bound to a key path of the scenario. */
function field(path, label, { kind = "number", options = null, hint = "", placeholder = "" } = {}) {
  const id = `fe-${path.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  const value = getAt(state.scenario, path);
  let input;
  if (options) {
    const opts = [...options];
    if (value != null && !opts.includes(String(value))) opts.push(String(value));
    input = el("select", { id, dataset: { path, kind: "select" } },
      (kind === "optional-select" ? [el("option", { value: "" }, "(none)")] : []).concat(
        opts.map((o) => el("option", { value: o, selected: String(value) === o }, o))));
    if (kind === "optional-select" && value == null) input.value = "";
  } else {
    input = el("input", { type: "text", id, value: showValue(value), placeholder, inputmode: kind === "number" ? "decimal" : null,
      dataset: { path, kind }, "aria-describedby": `${id}-error` });
  }
  input.addEventListener(options ? "change" : "input", () => {
    setAt(state.scenario, path, parseValue(input.value, options ? "select" : kind));
    scheduleCheck({ scenario: state.scenario });
  });
  return el("div", { class: kind === "list" ? "fe-field wide" : "fe-field", dataset: { path } },
    el("label", { for: id }, label, hint ? el("span", { class: "muted" }, ` ${hint}`) : null),
    input,
    provenanceControl(path, label),
    el("p", { class: "field-error", id: `${id}-error`, role: "alert", hidden: true }));
}

// --- provenance: from the doc (with its words) or assumed by the reviewer -------------------

const SOURCE_LABELS = { "": "unmarked", doc: "from the doc", assumed: "assumed" };

function provenanceControl(path, label) {
  const mark = state.provenance[path];
  const source = mark ? mark.source : "";
  const box = el("div", { class: "fe-prov", dataset: { source } });
  const select = el("select", { "aria-label": `Where ${path} comes from` },
    Object.entries(SOURCE_LABELS).map(([value, text]) => el("option", { value, selected: value === source }, text)));
  const quote = el("span", { class: "quote" }, mark && mark.quote ? `“${mark.quote}”` : "");
  const attach = el("button", { type: "button", hidden: source !== "doc", title: `The doc's words ${label} comes from` }, "Use the selected words");
  select.addEventListener("change", () => {
    if (select.value === "") delete state.provenance[path];
    else if (select.value === "assumed") state.provenance[path] = { source: "assumed" };
    else state.provenance[path] = { source: "doc", quote: (state.provenance[path] || {}).quote || "" };
    box.dataset.source = select.value;
    attach.hidden = select.value !== "doc";
    quote.textContent = select.value === "doc" && state.provenance[path].quote ? `“${state.provenance[path].quote}”` : "";
    if (select.value === "doc" && !state.provenance[path].quote) {
      status(document.getElementById("fe-doc-body") ? "Select the doc's words for it, then press \"Use the selected words\"."
        : "Link the config to its doc and save, to mark figures from it.");
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
  box.append(select, attach, quote);
  return box;
}

function provenanceReady() {
  return Object.values(state.provenance).every((m) => m.source !== "doc" || m.quote);
}

function section(title, ...children) {
  return el("fieldset", {}, el("legend", {}, title), ...children);
}

function fields(...items) {
  return el("div", { class: "fe-fields" }, items);
}

/** A list (hosts, faults) or a table (models) of items, each removable, with an "add" button. */
function items(title, entries, render, add, removeLabel) {
  const list = el("div", {}, entries.map((entry, i) => el("div", { class: "fe-item" },
    el("div", { class: "fe-item-head" }, el("strong", {}, render.title(entry, i)),
      el("button", { type: "button", onclick: () => { render.remove(entry, i); rebuild(); scheduleCheck({ scenario: state.scenario }); } }, removeLabel)),
    render.body(entry, i))));
  return section(title, list, el("p", {}, el("button", { type: "button", onclick: () => { add(); rebuild(); scheduleCheck({ scenario: state.scenario }); } }, `Add ${title.replace(/s$/, "").toLowerCase()}`)));
}

function renameModel(oldName, input) {
  const name = input.value.trim();
  if (!name || name === oldName || state.scenario.models[name]) return;
  const models = {};
  for (const [k, v] of Object.entries(state.scenario.models)) models[k === oldName ? name : k] = v;
  state.scenario.models = models;
  rebuild();
  scheduleCheck({ scenario: state.scenario });
}

function buildSections() {
  const s = state.scenario;
  const continuous = (s.worker || {}).batching === "continuous";
  const models = Object.keys(s.models || {});
  const modelItems = items("Models", models, {
    title: (name) => `Model ${name}`,
    remove: (name) => { delete s.models[name]; },
    body: (name) => {
      const rename = el("input", { type: "text", value: name, id: `fe-model-name-${name}`, "aria-label": `Name of model ${name}` });
      rename.addEventListener("change", () => renameModel(name, rename));
      return fields(
        el("div", { class: "fe-field" }, el("label", { for: `fe-model-name-${name}` }, "name"), rename),
        field(`models.${name}.share`, "share", { hint: "of traffic" }),
        field(`models.${name}.worker_units`, "worker units", { hint: "GPUs" }),
        field(`models.${name}.tokens`, "prompt tokens", { hint: "mean" }),
        field(`models.${name}.output_tokens`, "output tokens", { hint: "mean" }));
    },
  }, () => {
    let n = models.length + 1;
    while (s.models[`model${n}`]) n++;
    s.models[`model${n}`] = { share: 0, worker_units: 1, tokens: 500 };
  }, "Remove model");

  const hostItems = items("Hosts", s.hosts || [], {
    title: (_, i) => `Host group ${i}`,
    remove: (_, i) => { s.hosts.splice(i, 1); },
    body: (_, i) => fields(
      field(`hosts[${i}].count`, "hosts", { hint: "alike" }),
      field(`hosts[${i}].units`, "units per host"),
      field(`hosts[${i}].workers`, "layout", { kind: "list", hint: "MODEL@UNIT, …", placeholder: `${models[0] || "chat"}@0` })),
  }, () => { (s.hosts = s.hosts || []).push({ count: 1, units: 8, workers: models.length ? [`${models[0]}@0`] : [] }); }, "Remove group");

  const faultItems = items("Faults", s.faults || [], {
    title: (f, i) => `Fault ${i}`,
    remove: (_, i) => { s.faults.splice(i, 1); },
    body: (f, i) => {
      const action = "kill" in f ? "kill" : "restore";
      const kind = el("select", { id: `fe-fault-${i}-action`, "aria-label": `Fault ${i} action` },
        choices.faultActions.map((a) => el("option", { value: a, selected: a === action }, a)));
      kind.addEventListener("change", () => {
        const target = f[action];
        delete f[action];
        f[kind.value] = target;
        rebuild();
        scheduleCheck({ scenario: s });
      });
      return fields(
        field(`faults[${i}].at_s`, "at", { hint: "s" }),
        el("div", { class: "fe-field" }, el("label", { for: `fe-fault-${i}-action` }, "action"), kind),
        field(`faults[${i}].${action}`, "target", { kind: "text", placeholder: "host:0, worker:chat:1, dispatcher:chat" }));
    },
  }, () => { (s.faults = s.faults || []).push({ at_s: 60, kill: "host:0" }); }, "Remove fault");

  return [
    section("Run", fields(
      field("duration_s", "duration", { hint: "s" }),
      field("seed", "seed"))),
    modelItems,
    section("Traffic", fields(
      field("traffic.qps", "QPS", { hint: "mean" }),
      field("traffic.peak_qps", "peak QPS"),
      field("traffic.shape", "shape", { options: choices.shapes }),
      field("traffic.trace", "request trace", { kind: "optional-select", options: choices.traces }),
      field("traffic.trace_speedup", "trace speed-up", { hint: "x" }))),
    section("Dispatcher", fields(
      field("dispatcher.policy", "policy", { options: choices.policies }),
      field("dispatcher.standby", "standby", { options: choices.standbys }),
      field("dispatcher.queue_limit", "queue limit", { hint: "0: none" }),
      ...(continuous ? [] : [
        field("dispatcher.max_batch_tokens", "batch tokens", { hint: "most" }),
        field("dispatcher.close_after_s", "close after", { kind: "text", hint: "s or never" })]))),
    section("Worker model", fields(
      field("worker.batching", "batching", { options: choices.batching }),
      ...(continuous ? [
        field("worker.max_num_seqs", "sequences", { hint: "most" }),
        field("worker.max_batched_tokens", "tokens per step"),
        field("worker.kv_cache_tokens", "KV cache", { kind: "text", hint: "tokens or auto" })]
        : [field("worker.batch_s", "batch time", { hint: "s" })]))),
    hostItems,
    faultItems,
  ];
}

function rebuild() {
  if (!state.scenario) return;
  const focused = document.activeElement && document.activeElement.id;
  $("fe-sections").replaceChildren(...buildSections());
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
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

function scheduleCheck(body) {
  state.valid = false;
  updateSave();
  status("Checking…");
  clearTimeout(state.timer);
  state.timer = setTimeout(() => check(body), CHECK_DELAY_MS);
}

async function check(body) {
  const seq = ++state.seq;
  const from = "toml" in body ? "toml" : "form";
  let result;
  try {
    result = await api(config.urls.check, { method: "POST", body });
  } catch (err) {
    if (seq === state.seq) status(`Could not check: ${err.message}`);
    return;
  }
  if (seq !== state.seq) return;
  state.valid = result.valid;
  if (result.valid) {
    clearErrors();
    state.toml = result.toml;
    if (from === "form") $("fe-toml").value = result.toml;
    state.scenario = result.scenario;
    if (from === "toml") rebuild();
    status(config.fleet && !dirty() ? "No changes." : "Valid: the emulator accepts it.");
  } else {
    showError(result.error, from);
    status("Not saved: fix the error shown.");
  }
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
  const docBody = document.getElementById("fe-doc-body");
  if (docBody) {
    document.addEventListener("selectionchange", () => {
      const sel = window.getSelection();
      if (!sel || sel.isCollapsed || !sel.rangeCount || !docBody.contains(sel.getRangeAt(0).commonAncestorContainer)) return;
      state.docSelection = sel.toString().replace(/\s+/g, " ").trim();
    });
  }
  const toml = $("fe-toml");
  toml.value = config.toml;
  toml.addEventListener("input", () => scheduleCheck({ toml: toml.value }));
  $("fe-name").addEventListener("input", updateSave);
  docs.addEventListener("change", updateSave);
  $("fe-save").addEventListener("click", save);
  $("fleet-form").addEventListener("submit", (e) => e.preventDefault());
  check({ toml: config.toml }).then(() => {
    if (!state.scenario) {
      $("fe-sections").replaceChildren(el("p", { class: "muted" }, "Fix the TOML to use the form."));
      return;
    }
    applyLayout();
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
  state.scenario.hosts = layout.hosts;
  for (const path of Object.keys(state.provenance)) if (path.startsWith("hosts")) delete state.provenance[path];
  $("fe-name").value = layout.name || "";
  rebuild();
  scheduleCheck({ scenario: state.scenario });
  status("The layout is in the form; save to make it a new fleet config.");
}

init();

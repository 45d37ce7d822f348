// The review document: the opening, what the doc gets right and the restatement.
// Each [data-review-doc] box on the page edits some of its parts (the restate
// pass edits the restatement, the rank pass the opening and strengths). Saves
// carry the version they started from; a change saved by someone else shows up
// live in every part the reader has not touched.

import { api, el } from "../lib/api.js";

const PARTS = {
  opening: {
    label: "Opening",
    help: "The verdict in a sentence, then the few things to fix before shipping.",
  },
  strengths: {
    label: "What the doc gets right",
    help: "Say it before the first concern. Markdown.",
  },
  restatement: {
    label: "Restatement",
    help: "The design said back in a few sentences: components, clients, goals, stated assumptions. Markdown.",
  },
};

export function initReviewDocument(ctx) {
  const boxes = [...document.querySelectorAll("[data-review-doc]")];
  if (!boxes.length) return;
  const url = ctx.config.urls.document;
  // What the server last said, and the version the reader's edits start from.
  let server = null;
  let baseVersion = null;
  const fields = new Map(); // part key -> textarea
  const statuses = [];

  const dirty = (key) => server !== null && fields.get(key).value !== server[key];
  const anyDirty = () => [...fields.keys()].some(dirty);

  function meta() {
    if (!server) return "";
    if (!server.updated_by) return "Not written yet.";
    const when = server.updated_at ? new Date(server.updated_at).toLocaleString() : "";
    return `Last saved by ${server.updated_by}${when ? `, ${when}` : ""} (version ${server.version}).`;
  }

  // Each box grows with its text (up to a screenful), so a part reads whole.
  function fit(area) {
    const lines = area.value.split("\n").reduce((n, line) => n + Math.max(1, Math.ceil(line.length / 90)), 0);
    area.rows = Math.min(18, Math.max(area.dataset.part === "opening" ? 4 : 5, lines + 1));
  }

  function show(doc, { force = false } = {}) {
    const wasDirty = new Set([...fields.keys()].filter(dirty));
    server = doc;
    for (const [key, area] of fields) {
      if (force || !wasDirty.has(key)) area.value = doc[key];
      fit(area);
    }
    // Edits in progress keep the version they started from, so saving them
    // over a newer version is refused and the reader is asked.
    if (force || wasDirty.size === 0) baseVersion = doc.version;
    for (const s of statuses) s.meta.textContent = meta();
  }

  for (const box of boxes) {
    const keys = box.dataset.reviewDoc.split(/\s+/).filter((k) => PARTS[k]);
    const heading = el("h3", {}, keys.length > 1 ? "The review: opening and strengths" : `The review: ${PARTS[keys[0]].label.toLowerCase()}`);
    const parts = keys.map((key) => {
      const id = `rd-${key}`;
      const area = el("textarea", { id, rows: key === "opening" ? 4 : 5, "data-part": key, "aria-describedby": `${id}-help` });
      fields.set(key, area);
      area.addEventListener("input", () => fit(area));
      return el("div", {},
        el("label", { for: id }, PARTS[key].label),
        el("p", { class: "muted doc-meta", id: `${id}-help` }, PARTS[key].help),
        area);
    });
    const save = el("button", { type: "button", class: "primary", "data-save-doc": keys.join(" ") }, "Save");
    const takeTheirs = el("button", { type: "button", hidden: true }, "Use the saved text");
    const message = el("span", { role: "status", class: "doc-status" });
    const metaLine = el("p", { class: "doc-meta" });
    statuses.push({ meta: metaLine });

    save.addEventListener("click", async () => {
      const body = { version: baseVersion };
      for (const key of keys) if (dirty(key)) body[key] = fields.get(key).value;
      if (Object.keys(body).length === 1) {
        message.textContent = "Nothing to save.";
        return;
      }
      save.disabled = true;
      try {
        const doc = await api(url, { method: "PATCH", body });
        show(doc, { force: false });
        baseVersion = doc.version;
        message.textContent = "Saved.";
        takeTheirs.hidden = true;
      } catch (err) {
        if (err.status === 409) {
          const current = await api(url);
          server = current;
          // Keep the reader's text; saving again now replaces the newer version knowingly.
          baseVersion = current.version;
          for (const s of statuses) s.meta.textContent = meta();
          message.textContent = `${current.updated_by || "Someone"} saved the review meanwhile. Your text is kept: save again to replace theirs, or use theirs.`;
          takeTheirs.hidden = false;
        } else {
          message.textContent = `Could not save: ${err.message}`;
        }
      } finally {
        save.disabled = false;
      }
    });
    takeTheirs.addEventListener("click", () => {
      for (const key of keys) fields.get(key).value = server[key];
      takeTheirs.hidden = true;
      message.textContent = "";
    });

    box.replaceChildren(heading, ...parts, el("div", { class: "row" }, save, takeTheirs, message), metaLine);
    box.classList.add("card");
  }

  ctx.events.addEventListener("document-updated", (e) => {
    const doc = e.detail;
    if (!doc || (server && doc.version <= server.version)) return;
    // The echo of the reader's own save can arrive before the save's answer.
    const echo = [...fields].every(([key, area]) => area.value === doc[key]);
    if (echo) {
      show(doc, { force: true });
      return;
    }
    const touched = anyDirty();
    show(doc);
    ctx.say(touched
      ? `${doc.updated_by || "Someone"} saved the review document; your unsaved text is kept.`
      : `${doc.updated_by || "Someone"} updated the review document.`);
  });

  api(url).then((doc) => show(doc, { force: true }))
    .catch((err) => ctx.say(`Could not load the review document: ${err.message}`));
}

// The numbers pass: the calculator's figures from the session's fleet config,
// with their one-line explanations, and its suggested findings, each adopted
// with one click.

import { api, el, fleetFigures } from "../lib/api.js";

// Where a figure's inputs come from, in the reader's words.
const SOURCE_WORDS = { doc: "from the doc", measured: "measured", assumed: "rests on an assumption", unmarked: "inputs not marked" };

export async function initNumbers(ctx) {
  const box = document.getElementById("numbers-panel");
  const report = await fleetFigures(box, ctx.config.fleet, ctx.config.urls.numbers, {
    noFleet: "This session has no fleet config, so there is nothing to compute.",
    failed: "The numbers could not be computed",
  });
  if (!report) return;

  const table = el("table", { class: "numbers-table" },
    el("thead", {}, el("tr", {}, el("th", {}, "Figure"), el("th", {}, "For"), el("th", { class: "num" }, "Value"), el("th", {}, "How"))),
    el("tbody", {}, (report.figures || []).map((f) => el("tr", { dataset: { key: f.key } },
      el("td", {}, f.label),
      el("td", {}, f.model),
      el("td", { class: "num" }, f.display ?? `${f.value} ${f.unit || ""}`),
      el("td", { class: "explain" }, f.explain || "")))));

  const headline = el("div", { class: "headline-figures", "aria-label": "Headline figures" },
    (report.headline || []).map((f) => el("div", { class: "headline-figure", dataset: { key: f.key, source: f.source || "" } },
      el("span", { class: "slot" }, f.slot),
      el("strong", { class: "value" }, f.display ?? `${f.value} ${f.unit || ""}`),
      el("span", { class: "label" }, `${f.label}${f.model && f.model !== "fleet" ? ` (${f.model})` : ""}`),
      (f.beside || []).length ? el("span", { class: "beside muted" }, f.beside.map((b) => `${b.label}: ${b.display}`).join("; ")) : null,
      f.source ? el("span", { class: `source ${f.source}` }, SOURCE_WORDS[f.source] || f.source) : null)));

  const suggestions = el("div", { class: "suggestions" });
  function drawSuggestions() {
    const titles = new Set(ctx.store.all().map((f) => f.title));
    suggestions.replaceChildren(...(report.findings || []).map((s) => {
      const adopted = titles.has(s.title);
      // The doc's authors answer findings; they do not file them.
      const button = !ctx.config.canPublish ? null
        : el("button", { type: "button", class: adopted ? "" : "primary", disabled: adopted }, adopted ? "Adopted" : "Adopt");
      button?.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const created = await api(ctx.config.urls.findings, {
            method: "POST",
            body: { pass: s.pass || ctx.currentView, severity: s.severity, title: s.title, body: s.body },
          });
          ctx.updateFinding(created);
          ctx.say(`Adopted "${created.title}".`);
        } catch (err) {
          button.disabled = false;
          ctx.say(`Could not adopt: ${err.message}`);
        }
      });
      return el("div", { class: "suggestion", dataset: { assumed: s.assumed ? "yes" : "no" } },
        el("div", { class: "row" }, el("span", { class: `badge ${s.severity}` }, s.severity.replace("_", " ")),
          el("strong", {}, s.title), button),
        ...s.body.split("\n\n").map((para) => el("p", {}, para)),
        (s.cites || []).length ? el("ul", { class: "cites" }, s.cites.map((c) => el("li", { dataset: { ref: c.ref, source: c.source } },
          `${c.label}${c.model !== "fleet" ? ` (${c.model})` : ""}: ${c.display}, `, el("span", { class: `source ${c.source}` }, SOURCE_WORDS[c.source] || c.source)))) : null);
    }));
  }
  drawSuggestions();
  ctx.events.addEventListener("findings", drawSuggestions);

  box.replaceChildren(
    headline,
    provenanceBlock(report),
    docFiguresBlock(report, ctx),
    el("h3", {}, "Figures"), table,
    el("h3", {}, "Suggested findings"),
    (report.findings || []).length ? suggestions : el("p", { class: "muted" }, "The calculator has no suggestions for this fleet."));
}

/** Where the fleet config's input figures come from: the doc (with a link to the words), a measurement or the reviewer. */
function provenanceBlock(report) {
  const p = { doc: [], measured: [], assumed: [], ...(report.provenance || {}) };
  const value = (v) => (Array.isArray(v) ? v.join(", ") : typeof v === "object" && v !== null ? JSON.stringify(v) : String(v));
  const fromDoc = p.doc.map((f) => el("li", {},
    el("code", {}, f.path), ` = ${value(f.value)} `,
    el("a", { href: "#doc-body", class: "quote-link", onclick: (e) => { e.preventDefault(); showQuote(f.quote); } }, `“${f.quote}”`)));
  const assumed = p.assumed.map((f) => el("li", {}, el("code", {}, f.path), ` = ${value(f.value)}`));
  const measured = p.measured.map((f) => el("li", {}, el("code", {}, f.path), ` = ${value(f.value)}: ${f.note}`));
  return el("div", { class: "provenance" },
    el("h3", {}, "Where the inputs come from"),
    p.doc.length || p.assumed.length || p.measured.length
      ? el("div", { class: "provenance-lists" },
        el("div", {}, el("strong", {}, "From the doc"), fromDoc.length ? el("ul", { class: "from-doc" }, fromDoc) : el("p", { class: "muted" }, "none marked")),
        measured.length ? el("div", {}, el("strong", {}, "Measured"), el("ul", { class: "measured" }, measured)) : null,
        el("div", {}, el("strong", {}, "Assumed by the reviewer"), assumed.length ? el("ul", { class: "assumed" }, assumed) : el("p", { class: "muted" }, "none")))
      : el("p", { class: "muted" }, "No figure of this fleet config is marked as from the doc or assumed; mark them in the fleet editor."),
    report.assumed_note ? el("p", { class: "assumed-note" }, report.assumed_note) : null);
}

/** The figures the doc states, each with the key it fits; accepting one writes the key
 * into the fleet config, marked as from the doc with its sentence. */
function docFiguresBlock(report, ctx) {
  const figures = (report.doc_figures || []).filter((f) => f.key && !f.key.includes("MODEL"));
  if (!figures.length) return el("div", { class: "doc-figures" });
  const shown = (v) => (v === null || v === undefined ? "not set" : Array.isArray(v) ? v.join(", ") : String(v));
  const rows = figures.map((f) => {
    const same = f.current !== null && f.current !== undefined && String(f.current) === String(f.value);
    const done = f.marked === "doc" && same;
    const button = !report.can_edit_fleet || done ? null
      : el("button", { type: "button", class: "accept-figure" }, "Accept");
    button?.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await api(`/api/fleets/${ctx.config.fleet.id}/accept-figure/`, {
          method: "POST", body: { key: f.key, value: f.value, quote: f.sentence },
        });
        ctx.say(`Wrote ${f.key} = ${shown(f.value)}, from the doc.`);
        await initNumbers(ctx);
      } catch (err) {
        button.disabled = false;
        ctx.say(`Could not accept ${f.key}: ${err.message}`);
      }
    });
    return el("tr", { dataset: { key: f.key } },
      el("td", {}, el("a", { href: "#doc-body", class: "quote-link", onclick: (e) => { e.preventDefault(); showQuote(f.sentence); } }, f.text)),
      el("td", {}, el("code", {}, f.key)),
      el("td", { class: "num" }, shown(f.value)),
      el("td", { class: "num" }, shown(f.current)),
      el("td", {}, done ? el("span", { class: "source doc" }, "from the doc") : button));
  });
  return el("div", { class: "doc-figures" },
    el("h3", {}, "Figures the doc states"),
    el("table", { class: "numbers-table doc-figures-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "In the doc"), el("th", {}, "Key"), el("th", { class: "num" }, "Value"),
        el("th", { class: "num" }, "Config now"), el("th", {}, ""))),
      el("tbody", {}, rows)));
}

/** Select and show the doc's words a figure was read from. */
function showQuote(quote) {
  const root = document.getElementById("doc-body");
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const words = quote.replace(/\s+/g, " ");
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.nodeValue.replace(/\s/g, " ");
    const at = text.indexOf(words);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + words.length);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    node.parentElement.scrollIntoView({ block: "center" });
    return;
  }
  root.scrollIntoView({ block: "start" });
}

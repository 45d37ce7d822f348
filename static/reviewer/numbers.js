// The numbers pass: the calculator's figures from the session's fleet config,
// with their one-line explanations, and its suggested findings, each adopted
// with one click.

import { api, el, fleetFigures } from "./api.js";

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
      return el("div", { class: "suggestion" },
        el("div", { class: "row" }, el("span", { class: `badge ${s.severity}` }, s.severity.replace("_", " ")),
          el("strong", {}, s.title), button),
        el("p", {}, s.body));
    }));
  }
  drawSuggestions();
  ctx.events.addEventListener("findings", drawSuggestions);

  box.replaceChildren(
    el("h3", {}, "Figures"), table,
    el("h3", {}, "Suggested findings"),
    (report.findings || []).length ? suggestions : el("p", { class: "muted" }, "The calculator has no suggestions for this fleet."));
}

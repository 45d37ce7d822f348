// The session's reviewers, and inviting one by username (its owner only):
// PATCH /api/sessions/<id>/ with the new list of reviewers.

import { api, el } from "../lib/api.js";
import { config } from "../lib/config.js";

const box = document.getElementById("people");

async function show() {
  let session;
  try {
    session = await api(config.urls.session);
  } catch (err) {
    box.replaceChildren(el("span", { class: "muted" }, `Reviewers could not be read: ${err.message}`));
    return;
  }
  const names = session.reviewers || [];
  const parts = [el("span", { class: "muted" }, `Owner ${session.owner} · reviewers: ${names.length ? names.join(", ") : "none yet"}`)];
  if (config.canManage) {
    const input = el("input", { type: "text", id: "invite-name", placeholder: "username", "aria-label": "Username to invite", maxlength: 150 });
    const error = el("span", { class: "form-error", role: "alert", id: "invite-error" });
    const form = el("form", { class: "row invite-form", novalidate: true },
      input, el("button", { type: "submit" }, "Invite reviewer"), error);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const name = input.value.trim();
      error.textContent = "";
      if (!name) { error.textContent = "Give the username of the person to invite."; return; }
      if (name === session.owner || names.includes(name)) { error.textContent = `${name} already takes part in this review.`; return; }
      try {
        await api(config.urls.session, { method: "PATCH", body: { reviewers: [...names, name] } });
        await show();
        document.getElementById("invite-error").textContent = "";
        const status = document.getElementById("live-status");
        if (status) status.textContent = `Invited ${name}.`;
      } catch (err) {
        const data = err.data || {};
        error.textContent = data.reviewers ? `reviewers: ${[].concat(data.reviewers).flat().join(" ")}` : err.message;
      }
    });
    parts.push(form);
  }
  box.replaceChildren(...parts);
}

if (box) show();

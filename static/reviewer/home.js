// The home page: adding a design doc (POST /api/docs/); the page then reloads
// with the doc offered for a new review and a new fleet config.

import { api } from "./api.js";

const form = document.getElementById("new-doc-form");
if (form) {
  const error = document.getElementById("nd-error");
  const status = document.getElementById("nd-status");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const title = form.elements.title.value.trim();
    if (!title) {
      error.textContent = "title: give the doc a title.";
      form.elements.title.focus();
      return;
    }
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    status.textContent = "Adding…";
    try {
      const doc = await api("/api/docs/", { method: "POST", body: { title, body: form.elements.body.value } });
      status.textContent = `Added "${doc.title}".`;
      window.location.reload();
    } catch (err) {
      error.textContent = `Not added: ${err.message}`;
      status.textContent = "";
      button.disabled = false;
    }
  });
}

// The home page: adding a design doc (POST /api/docs/); the page then reloads
// with the doc offered for a new review and a new fleet config.

import { api, describeError } from "../lib/api.js";

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

// Trace uploads: sent to the API; a big trace is checked by a worker, so the form
// follows its status URL, showing the progress and the field-named error of a bad file.
for (const upload of document.querySelectorAll("form.upload-form[data-fleet]")) {
  const status = upload.querySelector(".upload-status");
  const error = upload.querySelector(".upload-error");
  const button = upload.querySelector("button[type=submit]");
  upload.addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = upload.elements.file.files[0];
    error.textContent = "";
    if (!file) {
      error.textContent = "trace: choose a trace file to upload.";
      return;
    }
    button.disabled = true;
    status.textContent = `Uploading ${file.name}…`;
    const body = new FormData();
    body.append("file", file);
    const csrf = upload.querySelector("input[name=csrfmiddlewaretoken]").value;
    const fail = (message) => {
      error.textContent = `Not saved: ${message}`;
      status.textContent = "";
      button.disabled = false;
    };
    let response;
    let data = null;
    try {
      response = await fetch(`/api/fleets/${upload.dataset.fleet}/trace/`, {
        method: "POST", body, credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrf },
      });
      data = await response.json().catch(() => null);
    } catch {
      fail(describeError(0, null));
      return;
    }
    if (!response.ok) {
      fail(describeError(response.status, data));
      return;
    }
    if (response.status !== 202) {
      window.location.reload();
      return;
    }
    const started = Date.now();
    const poll = async () => {
      let state;
      try {
        state = await api(data.status_url);
      } catch (err) {
        fail(err.message);
        return;
      }
      // Done: the version it made; refused: the field and the error naming the fix.
      if (state.version != null) {
        status.textContent = `Version ${state.version} replays ${state.name}.`;
        window.location.reload();
      } else if (state.error || state.field || state.finished_at) {
        fail(state.error || `${state.field}: the trace was refused.`);
      } else {
        const seconds = Math.round((Date.now() - started) / 1000);
        status.textContent = `Checking ${state.name} (${(state.size / 1e6).toFixed(1)} MB)… ${seconds} s`;
        setTimeout(poll, 1000);
      }
    };
    poll();
  });
}

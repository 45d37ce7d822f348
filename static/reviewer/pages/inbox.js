// The top bar's unread count, kept live over /ws/inbox/, and the inbox page's
// "mark read" buttons and e-mail setting.

import { api, wsUrl } from "../lib/api.js";

const badge = document.getElementById("inbox-unread");

function showUnread(count) {
  if (!badge) return;
  badge.textContent = String(count);
  badge.dataset.unread = String(count);
  badge.setAttribute("aria-label", `${count} unread`);
  badge.hidden = count === 0;
  document.dispatchEvent(new CustomEvent("inbox-unread", { detail: count }));
}

function follow() {
  let attempts = 0;
  function open() {
    const socket = new WebSocket(wsUrl("/ws/inbox/"));
    socket.addEventListener("open", () => { attempts = 0; });
    socket.addEventListener("message", (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      if (msg.type === "inbox.unread") showUnread(Number(msg.unread) || 0);
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4401) return;
      attempts += 1;
      setTimeout(open, Math.min(30000, 1000 * 2 ** Math.min(attempts, 5)));
    });
  }
  open();
}

function inboxPage() {
  const list = document.getElementById("inbox-list");
  if (!list) return;
  const status = document.getElementById("inbox-status");
  list.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-read]");
    if (!button) return;
    button.disabled = true;
    try {
      const answer = await api(`/api/notifications/${button.dataset.read}/read/`, { method: "POST" });
      button.closest("li").classList.remove("unread-item");
      button.remove();
      showUnread(answer.unread);
    } catch (err) {
      status.textContent = `Could not mark it read: ${err.message}`;
      button.disabled = false;
    }
  });
  const all = document.getElementById("inbox-read-all");
  if (all) {
    all.addEventListener("click", async () => {
      try {
        await api("/api/notifications/read-all/", { method: "POST" });
        for (const li of list.querySelectorAll(".unread-item")) li.classList.remove("unread-item");
        for (const b of list.querySelectorAll("button[data-read]")) b.remove();
        showUnread(0);
      } catch (err) {
        status.textContent = `Could not mark them read: ${err.message}`;
      }
    });
  }
  const mode = document.getElementById("email-mode");
  if (mode) {
    mode.addEventListener("change", async () => {
      try {
        const answer = await api("/api/notifications/settings/", { method: "PUT", body: { email: mode.value } });
        status.textContent = `E-mail setting saved: ${mode.options[mode.selectedIndex].text}.`;
        mode.value = answer.email;
      } catch (err) {
        status.textContent = `Could not save the setting: ${err.message}`;
      }
    });
  }
}

if (badge) follow();
inboxPage();

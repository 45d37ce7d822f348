// The session's live socket: findings made by others, the session's current
// pass, and who is looking at which pass. Reconnects with backoff.

import { el, wsUrl } from "../lib/api.js";

function renderPresence(ctx, viewers) {
  const box = document.getElementById("presence");
  const byUser = new Map();
  for (const v of viewers || []) byUser.set(v.user_id, v); // one chip per person
  const chips = [...byUser.values()].map((v) => el("span", {
    class: `viewer${Number(v.user_id) === Number(ctx.config.user.id) ? " me" : ""}`,
    title: `${v.username} is on the ${v.pass} pass`,
    dataset: { userId: v.user_id },
  }, `${v.username} · ${v.pass}`));
  box.replaceChildren(...(chips.length ? [el("span", { class: "muted" }, "Here now:"), ...chips] : []));
}

/**
 * Open /ws/sessions/<id>/ and keep it open.
 * handlers.onFinding(kind, finding) gets "created" | "updated" | "deleted";
 * handlers.onReconnect() runs after a dropped socket reconnects (to catch up).
 */
export function connectSession(ctx, handlers) {
  let socket = null;
  let attempts = 0;
  let everOpen = false;

  function sendPresence() {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "presence", pass: ctx.currentView || ctx.config.currentPass }));
    }
  }

  function open() {
    socket = new WebSocket(wsUrl(ctx.config.urls.wsSession));
    socket.addEventListener("open", () => {
      if (everOpen) handlers.onReconnect();
      if (attempts) ctx.say("Live updates resumed.");
      everOpen = true;
      attempts = 0;
      sendPresence();
    });
    socket.addEventListener("message", (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      if (msg.type && msg.type.startsWith("finding.")) {
        handlers.onFinding(msg.type.slice("finding.".length), msg.finding);
      } else if (msg.type === "review.published") {
        handlers.onReview?.(msg.review, msg.findings || []);
      } else if (msg.type === "pass.brought") {
        ctx.events.dispatchEvent(new CustomEvent("pass-brought", { detail: { pass: msg.pass, by: msg.by } }));
      } else if (msg.type === "turn.changed") {
        ctx.events.dispatchEvent(new CustomEvent("turn-changed"));
      } else if (msg.type === "error") {
        ctx.say(msg.error);
      } else if (msg.type === "pass.changed") {
        ctx.events.dispatchEvent(new CustomEvent("pass-changed", { detail: msg.pass }));
      } else if (msg.type === "document.updated") {
        ctx.events.dispatchEvent(new CustomEvent("document-updated", { detail: msg.document }));
      } else if (msg.type === "doc.reanchoring") {
        ctx.events.dispatchEvent(new CustomEvent("doc-reanchoring", { detail: msg }));
      } else if (msg.type === "presence") {
        renderPresence(ctx, msg.viewers);
      }
    });
    socket.addEventListener("close", (event) => {
      // 4403/4404: not allowed or no such session; retrying will not help.
      if (event.code === 4403 || event.code === 4404 || event.code === 4401) {
        ctx.say("Live updates are off: this account cannot follow the session.");
        return;
      }
      attempts += 1;
      const delay = Math.min(10000, 500 * 2 ** Math.min(attempts, 5));
      ctx.say("Live updates paused; reconnecting…");
      setTimeout(open, delay);
    });
  }

  // Sends a message on the session's socket; false when it is not open.
  ctx.sendSession = (message) => {
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify(message));
    return true;
  };
  ctx.events.addEventListener("pass-viewed", sendPresence);
  open();
  return { sendPresence };
}

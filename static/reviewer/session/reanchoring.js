// @ts-check
// Moving the findings onto a new revision of the doc: "re-anchoring: N of M
// findings placed" above the doc while a worker places them, from the page's
// starting state and then the session socket's doc.reanchoring events.

// The revision's re-anchoring states besides pending: done, or superseded (a
// newer revision took the findings over; its own events follow).
const PENDING = "pending";
const SUPERSEDED = "superseded";

const finished = (state) => state.status !== PENDING && state.status !== SUPERSEDED;

/** The line shown for one state ({status, done, total, revision}); "" when there is nothing to say. */
export function reanchoringText(state) {
  if (!state || !state.total) return "";
  const total = Number(state.total);
  const done = Math.min(Number(state.done) || 0, total);
  const noun = total === 1 ? "finding" : "findings";
  if (state.status === PENDING) return `re-anchoring: ${done} of ${total} ${noun} placed`;
  if (finished(state)) return `re-anchoring done: ${total} of ${total} ${noun} placed on revision ${state.revision}`;
  return "";
}

export function initReanchoring(ctx, box) {
  if (!box) return;
  let revision = 0;
  let hideTimer = null;

  function show(state) {
    const number = Number(state.revision) || 0;
    if (number < revision) return; // an older revision's late event
    revision = number;
    const text = reanchoringText(state);
    clearTimeout(hideTimer);
    box.textContent = text;
    box.dataset.status = state.status || "";
    box.hidden = !text;
    if (finished(state)) hideTimer = setTimeout(() => { box.hidden = true; }, 8000);
  }

  const start = ctx.config.reanchoring;
  if (start && start.status === PENDING) show(start);
  else if (start) revision = Number(start.revision) || 0;
  ctx.events.addEventListener("doc-reanchoring", (event) => show(event.detail));
}

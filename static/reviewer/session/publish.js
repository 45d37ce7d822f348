// Publishing: the reader's drafts, the publish form with its verdict, the
// session's published reviews, whose turn it is, and the owner's "file
// directly" switch.

import { api, apiList, el } from "../lib/api.js";
import { labelOf } from "../lib/config.js";
import { authorName } from "./findings.js";

export function initPublish(ctx) {
  const { config, store } = ctx;
  const form = document.getElementById("publish-form");
  const draftCount = document.getElementById("draft-count");
  const errorLine = document.getElementById("publish-error");
  const reviewsList = document.getElementById("reviews-list");
  const turnLine = document.getElementById("turn");
  const me = config.user.username;

  function reviewItem(r) {
    const summary = el("div", { class: "body" });
    if (r.summary_html) summary.innerHTML = r.summary_html; // sanitized by the server
    const counts = `${r.findings_published} finding${r.findings_published === 1 ? "" : "s"}`
      + (r.replies_published ? `, ${r.replies_published} repl${r.replies_published === 1 ? "y" : "ies"}` : "");
    return el("li", { dataset: { reviewId: r.id } },
      el("span", {}, `${r.reviewer}: `),
      el("span", { class: `verdict verdict-${r.verdict}` }, labelOf(config.verdicts, r.verdict)),
      el("span", { class: "muted" }, ` · ${counts}`),
      summary);
  }

  const reviews = new Map();
  function renderReviews() {
    reviewsList.replaceChildren(...[...reviews.values()].sort((a, b) => a.id - b.id).map(reviewItem));
  }

  // Filing, publishing, answering or changing findings changes whose turn it
  // is: read it again once the changes settle.
  let turnTimer = null;
  function refreshTurnSoon() {
    clearTimeout(turnTimer);
    turnTimer = setTimeout(loadTurn, 400);
  }

  function renderDrafts() {
    refreshTurnSoon();
    if (!draftCount) return;
    const mine = store.all().filter((f) => f.draft && authorName(f) === me).length;
    draftCount.textContent = mine ? `${mine} draft finding${mine === 1 ? "" : "s"}` : "No draft findings";
  }

  // What publishing will send, asked before it is sent.
  function publishQuestion() {
    const findings = store.all().filter((f) => f.draft && authorName(f) === me).length;
    const verdict = document.getElementById("publish-verdict");
    const label = verdict.options[verdict.selectedIndex]?.text || verdict.value;
    const what = findings
      ? `${findings} draft finding${findings === 1 ? "" : "s"}`
      : "no draft findings (only your verdict and any draft replies)";
    return `Publish your review with the verdict "${label}" and ${what}? Everyone in the session will see them.`;
  }

  async function loadTurn() {
    try {
      const t = await api(config.urls.turn);
      const parts = [];
      if (t.reviewers_with_drafts.length) parts.push(`reviewers with unpublished drafts: ${t.reviewers_with_drafts.join(", ")}`);
      if (t.authors.length) parts.push(`authors, to answer ${t.unanswered_fix_now} open fix-now finding${t.unanswered_fix_now === 1 ? "" : "s"}: ${t.authors.join(", ")}`);
      turnLine.textContent = parts.length ? `Whose turn: ${parts.join("; ")}.` : "Whose turn: nobody is waiting.";
      turnLine.dataset.turn = t.turn;
    } catch (err) {
      turnLine.textContent = `Could not tell whose turn it is: ${err.message}`;
    }
  }

  async function loadReviews() {
    try {
      for (const r of await apiList(config.urls.reviews)) reviews.set(r.id, r);
      renderReviews();
    } catch (err) {
      ctx.say(`Could not load the published reviews: ${err.message}`);
    }
  }

  // The keyboard's "p": bring the publish form up with its verdict focused;
  // Enter (or the button) then publishes.
  ctx.publishReview = () => {
    if (!form) {
      ctx.say("Only the session's reviewers publish reviews.");
      return;
    }
    form.scrollIntoView({ block: "nearest" });
    document.getElementById("publish-verdict").focus();
    ctx.say("Choose a verdict, then publish your review.");
  };

  // The keyboard's "x": the doc's authors mark the selected finding fixed.
  ctx.markFixed = async (f) => {
    if (!config.canResolve) {
      ctx.say("Only the session's reviewers and the doc's authors mark findings fixed.");
      return;
    }
    if (f.draft) return;
    try {
      const updated = await api(config.urls.findingState.replace("{id}", f.id),
        { method: "POST", body: { state: config.findingState.FIXED } });
      store.upsert(updated);
      ctx.say(`Marked "${f.title}" fixed.`);
    } catch (err) {
      ctx.say(`Could not mark "${f.title}" fixed: ${err.message}`);
    }
  };

  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      errorLine.textContent = "";
      if (!window.confirm(publishQuestion())) {
        ctx.say("Not published: your drafts stay drafts.");
        return;
      }
      const button = document.getElementById("publish-review");
      button.disabled = true;
      try {
        const review = await api(config.urls.reviews, { method: "POST", body: {
          verdict: document.getElementById("publish-verdict").value,
          summary: document.getElementById("publish-summary").value,
        } });
        document.getElementById("publish-summary").value = "";
        reviews.set(review.id, review);
        renderReviews();
        await ctx.reloadFindings();
        ctx.say(`Published: ${labelOf(config.verdicts, review.verdict)}, ${review.findings_published} finding${review.findings_published === 1 ? "" : "s"}.`);
        loadTurn();
      } catch (err) {
        errorLine.textContent = err.message;
      } finally {
        button.disabled = false;
      }
    });
  }

  const direct = document.getElementById("file-directly");
  if (direct) {
    direct.addEventListener("change", async () => {
      try {
        await api(config.urls.session, { method: "PATCH", body: { file_directly: direct.checked } });
        config.fileDirectly = direct.checked;
        ctx.say(direct.checked ? "Findings are now filed directly, without drafts." : "New findings are drafts until published.");
      } catch (err) {
        direct.checked = !direct.checked;
        errorLine.textContent = err.message;
      }
    });
  }

  ctx.events.addEventListener("review-published", (event) => {
    reviews.set(event.detail.id, event.detail);
    renderReviews();
    loadTurn();
  });
  // Another reviewer's drafts, or an author's state change, change whose turn it is.
  ctx.events.addEventListener("turn-changed", refreshTurnSoon);
  ctx.events.addEventListener("findings", renderDrafts);
  renderDrafts();
  loadReviews();
  loadTurn();
}

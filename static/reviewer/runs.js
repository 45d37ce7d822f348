// The break pass's emulator panel: one run, or two side by side (the same
// seed with a different policy, say), and opening a finding's evidence.

import { apiList, el } from "./api.js";
import { RunView } from "./runview.js";

export function initRuns(ctx) {
  const box = document.getElementById("runs-panel");
  if (!ctx.config.fleet) {
    box.replaceChildren(el("p", { class: "muted" }, "This session has no fleet config, so there is nothing to run."));
    return;
  }
  const side = el("div", { class: "runs-side" });
  const left = new RunView(ctx, { label: "Run A" });
  let right = null;
  side.append(left.node);

  const compare = el("button", { type: "button" }, "Compare with a second run");
  compare.addEventListener("click", () => {
    if (right) {
      right.closeSocket();
      right.node.remove();
      right = null;
      side.classList.remove("two");
      compare.textContent = "Compare with a second run";
      return;
    }
    right = new RunView(ctx, { label: "Run B" });
    right.seed.value = left.seed.value;
    right.speed.value = left.speed.value;
    const policy = ctx.config.fleet.scenario?.dispatcher?.policy;
    right.overrides.value = policy === "pull" ? "dispatcher.policy=round_robin" : "dispatcher.policy=pull";
    side.append(right.node);
    side.classList.add("two");
    compare.textContent = "Close the second run";
  });

  // Earlier runs of the session, to watch again (frames are stored) or compare.
  const earlier = el("select", { "aria-label": "Open an earlier run" }, el("option", { value: "" }, "Open an earlier run…"));
  async function loadEarlier() {
    try {
      const runs = await apiList(`${ctx.config.urls.runs}?session=${ctx.config.sessionId}`);
      earlier.replaceChildren(el("option", { value: "" }, "Open an earlier run…"),
        ...runs.filter((r) => r.sweep == null).map((r) => el("option", { value: r.id },
          `run ${r.id} · ${r.status} · seed ${r.seed}${r.overrides && r.overrides.length ? ` · ${r.overrides.join(", ")}` : ""}`)));
    } catch (err) {
      ctx.say(`Could not list earlier runs: ${err.message}`);
    }
  }
  earlier.addEventListener("focus", loadEarlier);
  earlier.addEventListener("change", () => {
    if (!earlier.value) return;
    (right || left).open(Number(earlier.value));
    earlier.value = "";
  });
  loadEarlier();

  box.replaceChildren(
    el("p", { class: "muted" }, `Runs play the session's fleet config "${ctx.config.fleet.name}". Overrides change keys for one run, e.g. traffic.qps=500 or dispatcher.policy=pull.`),
    el("div", { class: "row" }, compare, earlier),
    side);

  const refreshTargets = () => { left.fillTargets(); if (right) right.fillTargets(); };
  ctx.events.addEventListener("findings", refreshTargets);
  ctx.events.addEventListener("show-evidence", (e) => {
    const f = e.detail;
    if (f.evidence_run_id == null) return;
    left.pendingWindow = f.evidence_t_from_s != null ? [f.evidence_t_from_s, f.evidence_t_to_s] : null;
    left.open(f.evidence_run_id);
    left.node.scrollIntoView({ block: "start" });
  });
}

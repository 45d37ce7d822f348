// The five passes as steps: which one this reader is looking at, which one the
// session is at (shared live), and starting each pass's tools on first view.

import { api, loadPlotly } from "../lib/api.js";

const starters = (ctx) => ({
  numbers: () => import("./numbers.js").then((m) => m.initNumbers),
  trace: () => import("./trace.js").then((m) => m.initTrace),
  // Charts need plotly.js (4.8 MB): fetched only when the break pass opens.
  break: () => Promise.all([
    loadPlotly(ctx.config.urls.plotly),
    import("./runs.js").then((m) => m.initRuns),
    import("./placement.js").then((m) => m.initPlacement),
    import("./sweep.js").then((m) => m.initSweep),
  ]).then(([, ...fns]) => (ctx) => fns.forEach((fn) => fn(ctx))),
  rank: () => import("./rank.js").then((m) => m.initRank),
});

export function initPasses(ctx) {
  const { config } = ctx;
  const tabs = [...document.querySelectorAll("#steps [role=tab]")];
  const started = new Set();
  const layout = document.getElementById("session-layout");

  function markShared(key) {
    config.currentPass = key;
    for (const node of document.querySelectorAll("[data-shared-for]")) {
      node.textContent = node.dataset.sharedFor === key ? "session is here" : "";
    }
  }

  async function start(key) {
    const starter = starters(ctx)[key];
    if (started.has(key) || !starter) return;
    started.add(key);
    try {
      const init = await starter();
      init(ctx);
    } catch (err) {
      ctx.say(`The ${key} tools could not start: ${err.message}`);
      console.warn(err);
    }
  }

  function showPass(key, { focus = false, fromHash = false } = {}) {
    if (!config.passes.some((p) => p.key === key)) key = config.currentPass || config.passes[0].key;
    ctx.currentView = key;
    for (const tab of tabs) {
      const on = tab.dataset.pass === key;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
      if (on && focus) tab.focus();
    }
    for (const panel of document.querySelectorAll(".pass-panel")) panel.hidden = panel.dataset.pass !== key;
    // The break pass needs room for charts; the doc pane narrows.
    layout.classList.toggle("wide-pass", key === config.pass.BREAK || key === config.pass.RANK);
    if (!fromHash && location.hash !== `#${key}`) history.replaceState(null, "", `#${key}`);
    start(key);
    ctx.events.dispatchEvent(new CustomEvent("pass-viewed", { detail: key }));
  }
  ctx.showPass = showPass;

  for (const tab of tabs) {
    tab.addEventListener("click", () => showPass(tab.dataset.pass));
    tab.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(tab);
      let next = null;
      if (e.key === "ArrowRight") next = tabs[(i + 1) % tabs.length];
      else if (e.key === "ArrowLeft") next = tabs[(i - 1 + tabs.length) % tabs.length];
      else if (e.key === "Home") next = tabs[0];
      else if (e.key === "End") next = tabs[tabs.length - 1];
      if (next) {
        e.preventDefault();
        showPass(next.dataset.pass, { focus: true });
      }
    });
  }

  // "Bring everyone": on the session's socket, every open tab (other
  // reviewers' and authors' too) hears it and moves; over HTTP when the socket is down.
  document.getElementById("share-pass")?.addEventListener("click", async () => {
    const key = ctx.currentView;
    if (ctx.sendSession?.({ type: "bring", pass: key })) return;
    try {
      await api(config.urls.session, { method: "PATCH", body: { current_pass: key } });
      markShared(key);
      ctx.say(`Everyone in the session now sees the ${key} pass as current.`);
    } catch (err) {
      ctx.say(`Could not move the session: ${err.message}`);
    }
  });

  ctx.events.addEventListener("pass-changed", (e) => {
    const key = e.detail;
    // Readers who were on the session's pass move with it; others stay put.
    const following = ctx.currentView === config.currentPass;
    markShared(key);
    ctx.say(`The session moved to the ${key} pass.`);
    if (following) showPass(key);
  });

  ctx.events.addEventListener("pass-brought", (e) => {
    const { pass: key, by } = e.detail;
    markShared(key);
    if (ctx.currentView !== key) showPass(key);
    ctx.say(by === config.user.username ? `Everyone in the session is now on the ${key} pass.`
      : `${by} brought everyone to the ${key} pass.`);
  });

  window.addEventListener("hashchange", () => showPass(location.hash.slice(1), { fromHash: true }));
  markShared(config.currentPass);
  showPass(location.hash ? location.hash.slice(1) : config.currentPass, { fromHash: true });
}

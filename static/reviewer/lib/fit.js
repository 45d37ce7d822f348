// Charts follow their container's width. plotly's `responsive` option only
// listens to the window; a chart whose column narrows without the window
// changing (a second run opened beside it, a panel shown) would keep its old
// width and spill over its neighbour.

/** Resize every plotly chart inside `container` whenever the container's width changes. */
export function keepChartsFitted(container) {
  if (typeof ResizeObserver === "undefined") return;
  let width = null;
  let pending = false;
  const observer = new ResizeObserver((entries) => {
    const now = Math.round(entries[entries.length - 1].contentRect.width);
    if (now === width || now === 0) return;
    width = now;
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (!window.Plotly) return;
      for (const chart of container.querySelectorAll(".js-plotly-plot")) {
        window.Plotly.Plots.resize(chart);
      }
    });
  });
  observer.observe(container);
}

// Small fetch helpers shared by the page's modules: CSRF header, JSON bodies,
// error messages that name the field, and paginated lists.

function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  if (input) return input.value;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/** An error carrying the HTTP status and the parsed body of a refused request. */
export class ApiError extends Error {
  constructor(status, data) {
    super(describeError(status, data));
    this.status = status;
    this.data = data;
  }
}

/** One readable line from a DRF error body: "title: This field is required." */
export function describeError(status, data) {
  if (data && typeof data === "object") {
    if (typeof data.detail === "string") return data.detail;
    if (typeof data.error === "string") return data.error;
    const parts = [];
    for (const [key, value] of Object.entries(data)) {
      const text = Array.isArray(value) ? value.join(" ") : typeof value === "object" ? JSON.stringify(value) : String(value);
      parts.push(key === "non_field_errors" ? text : `${key}: ${text}`);
    }
    if (parts.length) return parts.join("; ");
  }
  if (status === 0) return "The server could not be reached; check the connection and try again.";
  return `The server answered ${status}.`;
}

/** fetch() with the session cookie, CSRF header and JSON in and out. */
export async function api(url, { method = "GET", body, headers = {} } = {}) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...headers } };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, null);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text.slice(0, 200) }; }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** Every item of a paginated DRF list (follows `next`), or the list itself if unpaginated. */
export async function apiList(url) {
  const items = [];
  let next = url;
  while (next) {
    const data = await api(next);
    if (Array.isArray(data)) return data;
    items.push(...(data.results || []));
    next = data.next || null;
  }
  return items;
}

/**
 * What a pass panel shows about the session's fleet, read from url; or null,
 * after saying in the panel why there is nothing (no fleet, or the request failed).
 */
export async function fleetFigures(box, fleet, url, { noFleet, failed }) {
  if (!fleet) {
    box.replaceChildren(el("p", { class: "muted" }, noFleet));
    return null;
  }
  // A docs worker works a fleet's figures out once per version; until it is done the
  // answer is 202 pending, and the panel shows a spinner and asks again (up to ten minutes).
  const giveUp = Date.now() + 10 * 60 * 1000;
  try {
    for (;;) {
      const data = await api(url);
      if (!data || !data.pending) return data;
      if (Date.now() > giveUp) throw new Error("still being worked out; reload the page later");
      box.replaceChildren(el("p", { class: "muted", role: "status", "aria-busy": "true" },
        el("span", { class: "spinner", "aria-hidden": "true" }), " Working out the figures for this fleet…"));
      await new Promise((resolve) => setTimeout(resolve, 1000 * (data.retry_after_s || 2)));
    }
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, `${failed}: ${err.message}`));
    return null;
  }
}

/** Fill "{id}" in a URL template. */
export function fill(template, id) {
  return template.replace("{id}", encodeURIComponent(id));
}

/** A websocket URL on this page's host for a path like /ws/sessions/1/. */
export function wsUrl(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}

/** Create an element with attributes and children in one call. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let plotlyLoading = null;

/** Load plotly.js (served from the plotly package) once, when a pass first needs charts. */
export function loadPlotly(url) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoading) {
    plotlyLoading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { plotlyLoading = null; reject(new Error("plotly.js could not be loaded")); };
      document.head.append(script);
    });
  }
  return plotlyLoading;
}

// The rendered doc: turning a text selection into an anchor on the Markdown
// source, and drawing findings' anchors back onto the rendered text.
//
// Anchors are stored against the revision's Markdown source (W3C
// TextQuoteSelector + TextPositionSelector offsets into revision.body), while
// the reader selects rendered text. The two differ only by markup and
// whitespace, so both sides are compared in a "canonical" form that drops
// whitespace and Markdown's inline markers, keeping a map back to offsets.

const CONTEXT_CHARS = 32;
const DROPPED = /[\s*_`#>\\]/;

/** The text without whitespace and Markdown markers, and each kept char's offset. */
export function canonical(text) {
  let s = "";
  const map = [];
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (DROPPED.test(ch)) continue;
    s += ch;
    map.push(i);
  }
  return { s, map };
}

function occurrences(haystack, needle, limit = 200) {
  const found = [];
  if (!needle) return found;
  let at = haystack.indexOf(needle);
  while (at !== -1 && found.length < limit) {
    found.push(at);
    at = haystack.indexOf(needle, at + 1);
  }
  return found;
}

/** Text nodes under root (skipping none) with their offsets in the concatenated text. */
export function textIndex(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  let text = "";
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    nodes.push({ node, start: text.length });
    text += node.nodeValue;
  }
  return { text, nodes };
}

function offsetOf(index, container, offset) {
  if (container.nodeType === Node.TEXT_NODE) {
    const entry = index.nodes.find((n) => n.node === container);
    return entry ? entry.start + offset : null;
  }
  // An element boundary: count the text before its offset-th child.
  const child = container.childNodes[offset];
  if (!child) {
    const after = index.nodes.filter((n) => container.contains(n.node));
    const last = after[after.length - 1];
    return last ? last.start + last.node.nodeValue.length : null;
  }
  const first = index.nodes.find((n) => child === n.node || child.contains(n.node) || (child.compareDocumentPosition(n.node) & Node.DOCUMENT_POSITION_FOLLOWING));
  return first ? first.start : index.text.length;
}

/** The current selection if it lies inside root: its rendered quote and relative position. */
export function selectionIn(root) {
  const sel = window.getSelection();
  if (!sel || sel.isCollapsed || sel.rangeCount === 0) return null;
  const range = sel.getRangeAt(0);
  if (!root.contains(range.commonAncestorContainer)) return null;
  const index = textIndex(root);
  const start = offsetOf(index, range.startContainer, range.startOffset);
  const end = offsetOf(index, range.endContainer, range.endOffset);
  if (start === null || end === null || end <= start) return null;
  const quote = index.text.slice(start, end).replace(/\s+/g, " ").trim();
  if (!quote) return null;
  return { quote, ratio: index.text.length ? start / index.text.length : 0 };
}

/**
 * Anchor fields for a quote of the rendered doc, located in the Markdown source.
 * ratio (0..1) says roughly where the quote was, to choose among repeats.
 */
export function anchorForQuote(source, quote, ratio = null) {
  const q = canonical(quote).s;
  const src = canonical(source);
  const hits = occurrences(src.s, q);
  if (!q || hits.length === 0) {
    // Not found in the source (the selection crossed markup we do not map):
    // keep the quote alone and let the server place it.
    return { anchor_exact: quote, anchor_prefix: "", anchor_suffix: "" };
  }
  let best = hits[0];
  if (ratio !== null && hits.length > 1) {
    const want = ratio * source.length;
    best = hits.reduce((a, b) => (Math.abs(src.map[b] - want) < Math.abs(src.map[a] - want) ? b : a));
  }
  const start = src.map[best];
  const end = src.map[best + q.length - 1] + 1;
  return {
    anchor_exact: source.slice(start, end),
    anchor_prefix: source.slice(Math.max(0, start - CONTEXT_CHARS), start),
    anchor_suffix: source.slice(end, end + CONTEXT_CHARS),
    anchor_start: start,
    anchor_end: end,
  };
}

/** Where a finding's quote sits in the rendered text: [start, end) or null. */
export function locate(finding, rendered, sourceLength) {
  if (!finding.anchor_exact) return null;
  const q = canonical(finding.anchor_exact).s;
  const hits = occurrences(rendered.canon.s, q);
  if (hits.length === 0) return null;
  let best = hits[0];
  if (hits.length > 1) {
    const prefix = canonical(finding.anchor_prefix || "").s.slice(-12);
    const suffix = canonical(finding.anchor_suffix || "").s.slice(0, 12);
    const want = finding.anchor_start != null && sourceLength
      ? (finding.anchor_start / sourceLength) * rendered.text.length : null;
    const score = (h) => {
      let s = 0;
      if (prefix && rendered.canon.s.slice(Math.max(0, h - prefix.length), h) === prefix) s += 2;
      if (suffix && rendered.canon.s.slice(h + q.length, h + q.length + suffix.length) === suffix) s += 2;
      if (want !== null) s -= Math.abs(rendered.canon.map[h] - want) / Math.max(1, rendered.text.length);
      return s;
    };
    best = hits.reduce((a, b) => (score(b) > score(a) ? b : a));
  }
  return { start: rendered.canon.map[best], end: rendered.canon.map[best + q.length - 1] + 1 };
}

function wrapRange(root, start, end, makeMark) {
  // Recomputed per finding: earlier wraps split text nodes.
  const index = textIndex(root);
  for (const { node, start: nodeStart } of index.nodes) {
    const nodeEnd = nodeStart + node.nodeValue.length;
    if (nodeEnd <= start || nodeStart >= end) continue;
    if (!node.nodeValue.trim() && node.parentNode && /^(UL|OL|TABLE|TBODY|TR)$/.test(node.parentNode.nodeName)) continue;
    let target = node;
    const from = Math.max(start, nodeStart) - nodeStart;
    const to = Math.min(end, nodeEnd) - nodeStart;
    if (to < target.nodeValue.length) target.splitText(to);
    if (from > 0) target = target.splitText(from);
    const mark = makeMark();
    target.parentNode.insertBefore(mark, target);
    mark.appendChild(target);
  }
}

/**
 * Reset the doc to its rendered HTML and mark every placeable finding.
 * Returns the findings that quote the doc but could not be placed.
 */
export function drawHighlights(root, originalHtml, findings, sourceLength, onActivate) {
  root.innerHTML = originalHtml;
  const index = textIndex(root);
  const rendered = { text: index.text, canon: canonical(index.text) };
  const placements = [];
  const unplaced = [];
  for (const f of findings) {
    if (!f.anchor_exact) continue;
    const spot = f.orphaned ? null : locate(f, rendered, sourceLength);
    if (spot) placements.push({ f, spot });
    else unplaced.push(f);
  }
  for (const { f, spot } of placements) {
    wrapRange(root, spot.start, spot.end, () => {
      const mark = document.createElement("mark");
      mark.className = `finding ${f.severity || ""}`;
      mark.dataset.findingId = f.id;
      mark.title = f.title;
      mark.addEventListener("click", () => onActivate(f.id));
      return mark;
    });
  }
  // One mark per finding is focusable, so the highlights are reachable by keyboard.
  const seen = new Set();
  for (const mark of root.querySelectorAll("mark.finding")) {
    if (seen.has(mark.dataset.findingId)) continue;
    seen.add(mark.dataset.findingId);
    mark.tabIndex = 0;
    mark.setAttribute("role", "button");
    mark.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onActivate(Number(mark.dataset.findingId)); }
    });
  }
  return unplaced;
}

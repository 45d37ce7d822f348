// The rendered doc: reporting a reader's selection, and drawing findings'
// anchors back onto the rendered text.
//
// Anchors live on the revision's Markdown source (W3C TextQuoteSelector +
// TextPositionSelector offsets into revision.body) while the reader selects
// rendered text. The server does all the matching between the two: the page
// sends a selection as rendered text with its context and position, and draws
// an anchor through the map from source to rendered offsets the server put in
// the page's config (config.docMap). Nothing here searches the text.

import { codePointLength, codePointToUtf16, firstCodePoints, lastCodePoints, utf16ToCodePoint } from "../lib/offsets.js";

const CONTEXT_CHARS = 32;

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

/** The current selection if it lies inside root, as the server takes it:
 * {quote, prefix, suffix, position} in rendered text (see SelectionSerializer). */
export function selectionIn(root) {
  const sel = window.getSelection();
  if (!sel || sel.isCollapsed || sel.rangeCount === 0) return null;
  const range = sel.getRangeAt(0);
  if (!root.contains(range.commonAncestorContainer)) return null;
  const index = textIndex(root);
  let start = offsetOf(index, range.startContainer, range.startOffset);
  let end = offsetOf(index, range.endContainer, range.endOffset);
  if (start === null || end === null || end <= start) return null;
  // Leave out whitespace at either end, so the context is what touches the words.
  while (start < end && /\s/.test(index.text[start])) start++;
  while (end > start && /\s/.test(index.text[end - 1])) end--;
  if (end <= start) return null;
  const flat = (text) => text.replace(/\s+/g, " ");
  return {
    quote: flat(index.text.slice(start, end)),
    // Context and position in code points, as the server counts.
    prefix: lastCodePoints(flat(index.text.slice(Math.max(0, start - 4 * CONTEXT_CHARS), start)), CONTEXT_CHARS),
    suffix: firstCodePoints(flat(index.text.slice(end, end + 4 * CONTEXT_CHARS)), CONTEXT_CHARS),
    position: index.text.length ? utf16ToCodePoint(index.text, start) / codePointLength(index.text) : 0,
  };
}

/** Where source offsets [start, end) are in the rendered text, by the server's map; null if unmapped. */
export function toRendered(docMap, start, end) {
  let first = null;
  let last = null;
  for (const [s, r, n] of docMap.runs) {
    const lo = Math.max(start, s);
    const hi = Math.min(end, s + n);
    if (lo >= hi) continue;
    if (first === null) first = r + lo - s;
    last = r + hi - s;
  }
  return first === null ? null : { start: first, end: last };
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
 * Reset the doc to its rendered HTML and mark every finding anchored on the
 * page's revision (doc = {revision, map}). Returns the findings that quote the
 * doc but cannot be drawn here (orphaned, or on another revision).
 */
export function drawHighlights(root, originalHtml, findings, doc, onActivate) {
  root.innerHTML = originalHtml;
  const placements = [];
  const unplaced = [];
  for (const f of findings) {
    if (!f.anchor_exact) continue;
    // Offsets are on the finding's revision: only those on the page's revision can be drawn.
    const onThisPage = !f.orphaned && f.revision === doc.revision && f.anchor_start != null;
    const spot = onThisPage ? toRendered(doc.map, f.anchor_start, f.anchor_end) : null;
    if (spot) placements.push({ f, spot });
    else unplaced.push(f);
  }
  // The map gives code points of the rendered text; the DOM counts UTF-16 units.
  const rendered = textIndex(root).text;
  for (const { f, spot } of placements) {
    wrapRange(root, codePointToUtf16(rendered, spot.start), codePointToUtf16(rendered, spot.end), () => {
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

// @ts-check
// Offsets in one unit end to end: the server counts code points (Python str
// indices) while the DOM counts UTF-16 code units, so an emoji or any other
// astral character ("😀", "𝔘") is one on the server and two here. Every offset
// that crosses between the page and the server goes through these helpers.

/** The UTF-16 index in text of code point offset cp (clamped to the text). */
export function codePointToUtf16(text, cp) {
  let units = 0;
  let points = 0;
  while (points < cp && units < text.length) {
    const code = text.charCodeAt(units);
    units += code >= 0xd800 && code <= 0xdbff && units + 1 < text.length ? 2 : 1;
    points += 1;
  }
  return units;
}

/** The code point offset of UTF-16 index units in text. */
export function utf16ToCodePoint(text, units) {
  let points = 0;
  for (let i = 0; i < units && i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < units) i++;
    points += 1;
  }
  return points;
}

/** The length of text in code points. */
export function codePointLength(text) {
  return utf16ToCodePoint(text, text.length);
}

/** At most n code points from the end of text (never half a surrogate pair). */
export function lastCodePoints(text, n) {
  const points = Array.from(text);
  return points.slice(Math.max(0, points.length - n)).join("");
}

/** At most n code points from the start of text. */
export function firstCodePoints(text, n) {
  return Array.from(text).slice(0, n).join("");
}

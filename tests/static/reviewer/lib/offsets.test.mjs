// Offsets cross between the server (code points) and the DOM (UTF-16 units).
import assert from "node:assert/strict";
import test from "node:test";

import {
  codePointLength, codePointToUtf16, firstCodePoints, lastCodePoints, utf16ToCodePoint,
} from "../../../../static/reviewer/lib/offsets.js";

const text = "a😀b𝔘c"; // two astral characters: 5 code points, 7 UTF-16 units

test("a code point offset maps to its UTF-16 index and back", () => {
  assert.equal(text.length, 7);
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((cp) => codePointToUtf16(text, cp)), [0, 1, 3, 4, 6, 7]);
  assert.deepEqual([0, 1, 3, 4, 6, 7].map((u) => utf16ToCodePoint(text, u)), [0, 1, 2, 3, 4, 5]);
});

test("offsets past the end are clamped to the text", () => {
  assert.equal(codePointToUtf16(text, 99), 7);
  assert.equal(utf16ToCodePoint(text, 99), 5);
});

test("a length and the ends are counted in code points, never half a pair", () => {
  assert.equal(codePointLength(text), 5);
  assert.equal(lastCodePoints(text, 2), "𝔘c");
  assert.equal(firstCodePoints(text, 2), "a😀");
  assert.equal(lastCodePoints("ab", 5), "ab");
});

// The line shown above the doc while the findings move onto a new revision.
import assert from "node:assert/strict";
import test from "node:test";

import { reanchoringText } from "../../../../static/reviewer/session/reanchoring.js";

test("a pending re-anchoring counts the findings placed so far", () => {
  assert.equal(reanchoringText({ status: "pending", done: 2, total: 5, revision: 3 }), "re-anchoring: 2 of 5 findings placed");
  assert.equal(reanchoringText({ status: "pending", done: 9, total: 1, revision: 3 }), "re-anchoring: 1 of 1 finding placed");
});

test("a finished one names its revision; a superseded one or nothing to place says nothing", () => {
  assert.equal(reanchoringText({ status: "done", done: 5, total: 5, revision: 4 }),
    "re-anchoring done: 5 of 5 findings placed on revision 4");
  assert.equal(reanchoringText({ status: "superseded", done: 1, total: 5, revision: 4 }), "");
  assert.equal(reanchoringText({ status: "done", total: 0 }), "");
  assert.equal(reanchoringText(null), "");
});

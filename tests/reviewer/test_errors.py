"""One mapping from service errors to HTTP answers and websocket replies."""

from __future__ import annotations

import pytest

from reviewer.api.errors import error_body, http_status, ws_reply
from reviewer.errors import Conflict, Forbidden, Invalid, NotFound, OverLimit, ServiceError


@pytest.mark.parametrize("exc, status, body", [
    (Invalid("values", "values: give a list of numbers"), 400, {"values": ["values: give a list of numbers"]}),
    (Forbidden("Only the owner ranks findings."), 403, {"detail": "Only the owner ranks findings."}),
    (NotFound("No such run."), 404, {"detail": "No such run."}),
    (Conflict("Changed meanwhile (version 3).", current=3), 409,
     {"detail": "Changed meanwhile (version 3).", "current_version": 3}),
    (Conflict("run 4 is already done", field="status"), 409, {"detail": "run 4 is already done"}),
    (OverLimit("RUNS_PER_USER", "you have 3 runs going"), 429,
     {"detail": "you have 3 runs going", "setting": "RUNS_PER_USER"}),
])
def test_it_answers_each_kind_of_refusal_with_its_status_and_body(exc: ServiceError, status: int,
                                                                   body: dict) -> None:
    assert http_status(exc) == status
    assert error_body(exc) == body
    assert ws_reply(exc) == {"type": "error", "error": exc.message, "field": exc.field, "status": status}


def test_it_names_a_field_as_the_api_calls_it() -> None:
    assert error_body(Invalid("review_pass", "Unknown pass."), {"review_pass": "pass"}) == {"pass": ["Unknown pass."]}

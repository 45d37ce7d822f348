"""Model fields shared by the app's models."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class OrderedJSONField(models.JSONField):
    """A JSONField that gives objects back with their keys in the order written.

    PostgreSQL's ``jsonb`` (what ``JSONField`` uses there) stores an object's
    keys in an order of its own, shortest first, while the emulator reads a
    scenario's models in the order the scenario lists them (which model a
    request goes to is drawn in that order), so a scenario read back from
    ``jsonb`` could give another run than the same scenario from its TOML.
    On PostgreSQL this field is a ``text`` column holding the JSON as written
    (``json`` would keep the order too, but has no equality, so a query with
    DISTINCT over the row fails); elsewhere it is a plain ``JSONField``
    (SQLite stores the text). It takes no key lookups in queries on
    PostgreSQL; the app makes none.
    """

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "text"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        return json.dumps(value, cls=self.encoder)

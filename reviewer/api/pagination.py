"""The API's list pages: DRF's page numbers, where ``page`` is a whole number from 1.

DRF's own pagination reads an empty ``page=`` as the first page, ``page=last``
as the last and a word as a missing page (404). Here ``page`` is what the
schema says: a whole number, 1 or more, else a 400 naming it; a page past the
last stays a 404.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

_PAGE_NUMBER = re.compile(r"[0-9]+")


class PageNumberPagination(pagination.PageNumberPagination):
    """Pages of ``PAGE_SIZE`` items chosen by ``?page=N`` (N from 1)."""

    last_page_strings = ()

    def get_page_number(self, request: Any, paginator: Any) -> int:
        value = request.query_params.get(self.page_query_param)
        if value is None:
            return 1
        if not _PAGE_NUMBER.fullmatch(value) or int(value) < 1:
            raise ValidationError({self.page_query_param: ["Give a page number: a whole number, 1 or more."]})
        return int(value)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters

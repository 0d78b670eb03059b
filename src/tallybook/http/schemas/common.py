"""What every capability's schemas share: the id patterns and the id type.

The convention (docs/architecture.md, "HTTP"): the request and response bodies
of a capability live in ``http/schemas/<capability>.py``, next to its routes in
``http/routers/<capability>.py``; path, query and header parameters stay with
the routes. Constraints mirror the domain's (ids, fund names, amount bounds,
metadata limits) so that the OpenAPI document states them and bad input is
refused before it reaches a service; the services check again.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.store.records.codec import iso

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]*$"
FUND_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
LEG_ACCOUNT_PATTERN = r"^@?[A-Za-z0-9][A-Za-z0-9._:\-]*$"

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]


def _not_a_number(value: object) -> object:
    """Refuse a number as a time: pydantic reads one (or a string of digits) as
    Unix time, in seconds or milliseconds by its size, which the API never says."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
    elif not isinstance(value, int | float):
        return value
    raise ValueError("must be an ISO 8601 date-time (2026-01-31T12:00:00Z), not a number")


#: a time given in a request: ISO 8601 text, never a number
Time = Annotated[datetime, BeforeValidator(_not_a_number)]

#: a time in an answer: UTC with six fraction digits, ``2026-01-31T12:00:00.000000Z``,
#: as webhooks, billing and the CLI print it; one width, so times sort as text
#: (pydantic left out a zero fraction: ``...:00Z`` beside ``...:00.123456Z``)
TimeOut = Annotated[
    datetime,
    PlainSerializer(iso, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def _ascii_digits(value: object) -> object:
    """A number in a query string is ASCII digits: pydantic's lax mode reads ``1_0``,
    `` 5``, ``+5`` and ``5.0`` as integers too (as the CLI did with ``int()``)."""
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value, flags=re.ASCII):
        raise ValueError("must be an integer in ASCII digits")
    return value


#: for an integer in a query string (a page size, a number of days), after its
#: ``Query``: ``Annotated[int, Query(ge=1), ASCII_DIGITS]`` (before it, or nested in
#: the type, FastAPI's OpenAPI document loses the bounds)
ASCII_DIGITS = BeforeValidator(_ascii_digits)

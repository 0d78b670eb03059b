"""API keys through the Python API: wrong types are refused, not TypeErrors.

``keys.authenticate(None)`` (or bytes, an int) raised ``TypeError`` from the
secret's pattern match instead of ``Unauthorized``; ``keys.create`` raised
``TypeError``/``AttributeError`` for scopes that were not a string or a list of
strings and for a name that was not a string.
"""

from __future__ import annotations

from typing import Any

import pytest

from tallybook.errors import Unauthorized, ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("secret", [None, b"tb_x", 7])
def test_a_secret_that_is_not_a_string_is_unauthorized(ledger: Ledger, secret: Any) -> None:
    with pytest.raises(Unauthorized):
        ledger.keys.authenticate(secret)


@pytest.mark.parametrize(
    ("scopes", "name"), [(None, None), (7, None), (b"read", None), (["read", 1], None), ("read", 7)]
)
def test_create_refuses_scopes_or_name_of_the_wrong_type(
    ledger: Ledger, scopes: Any, name: Any
) -> None:
    with pytest.raises(ValidationError):
        ledger.keys.create(PROGRAM, scopes, name)
    assert ledger.keys.list(PROGRAM) == []

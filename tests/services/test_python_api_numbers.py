"""Whole-number options of the Python API refuse bools, floats and strings.

``billing.configure(bucket_minutes=True)`` stored one-minute buckets (a bool
is an int) and ``grace_minutes=True`` a one-minute grace; a dict or datetime
raised ``TypeError``. ``loyalty.expiring_page(days=1.5)`` was accepted and
``days="5"`` raised ``TypeError``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tallybook.errors import ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [True, 15.0, "15", {}])
def test_billing_minutes_must_be_whole_numbers(ledger: Ledger, value: Any) -> None:
    before = ledger.billing.state(PROGRAM)
    for option in ("bucket_minutes", "grace_minutes"):
        with pytest.raises(ValidationError, match=option):
            ledger.billing.configure(PROGRAM, **{option: value})
    assert ledger.billing.state(PROGRAM) == before


@pytest.mark.parametrize("days", [1.5, "5", True, [5]])
def test_expiring_days_must_be_an_integer(ledger: Ledger, days: Any) -> None:
    open_accounts(ledger, "alice")
    ledger.loyalty.configure(PROGRAM, {})
    with pytest.raises(ValidationError, match="days must be an integer"):
        ledger.loyalty.expiring_page(PROGRAM, "alice", days=days)

"""Bad input to the Python API is a ``tallybook.errors`` error and writes nothing.

README: "Bad input never raises TypeError or ValueError and writes nothing".
"""

from __future__ import annotations

import pytest

from tallybook.errors import NotFound, ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts, state

pytestmark = pytest.mark.unit

#: past Python's 4300-digit limit of int-to-str: ``str()`` of it raises ValueError
HUGE = 10**5000


def test_an_integer_past_4300_digits_is_refused_naming_the_field(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    before = state(ledger, "alice")
    with pytest.raises(ValidationError, match=r"payload\.n: a number has at most 38 digits"):
        ledger.notifications.add(PROGRAM, "alice", "Promo", {"n": HUGE})
    with pytest.raises(ValidationError, match=r"payload\.n"):
        ledger.notifications.add(PROGRAM, "alice", "Promo", {"n": [-HUGE]})
    for amount in (-HUGE, HUGE):
        with pytest.raises(ValidationError, match="amount"):
            ledger.wallet.credit(PROGRAM, "alice", "cash", amount, txn_id="t-1")
    assert state(ledger, "alice") == before
    assert ledger.notifications.list(PROGRAM, "alice") == []
    with pytest.raises(NotFound):
        ledger.wallet.transaction(PROGRAM, "t-1")

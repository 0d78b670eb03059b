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


@pytest.mark.parametrize(
    "attributes",
    [
        {f"k{i}": "x" * 1000 for i in range(390)},  # 390 KB: opened, then every earn ItemTooLarge
        {f"k{i}": "x" for i in range(17)},
        {"k": "x" * 257},
        {"k" * 65: "x"},
        {"k": 5},
        {"k": ["x"]},
    ],
    ids=["400kb", "17-names", "long-value", "long-name", "int", "list"],
)
def test_account_attributes_have_the_http_bounds(ledger: Ledger, attributes: object) -> None:
    with pytest.raises(ValidationError, match="attribute"):
        ledger.accounts.open(PROGRAM, "carol", attributes=attributes)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        ledger.accounts.get(PROGRAM, "carol")


def test_an_account_with_the_most_attributes_allowed_still_earns(ledger: Ledger) -> None:
    attributes = {f"{i:02d}" + "k" * 62: "x" * 256 for i in range(16)}
    account, created = ledger.accounts.open(PROGRAM, "carol", attributes=attributes)
    assert created
    assert account.client_attributes == attributes
    ledger.loyalty.configure(PROGRAM, {})
    assert ledger.loyalty.earn(PROGRAM, "carol", "o-1", 1000).points > 0

"""A program worth looking at: accounts with history, holds, notifications, tiers, a report."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock

LOYALTY = Path(__file__).resolve().parents[2] / "examples" / "loyalty.toml"


@dataclass(frozen=True)
class Seeded:
    admin_secret: str
    read_secret: str
    account: str
    order: str
    hold: str
    notification: str
    #: a wallet debit spread over bonus, store credit and cash (rich seed only)
    split: str = "pay-alice"


#: a payload an HTML page must show as text, not as markup or JSON escapes
PROMO = {"text": "<b>double</b> points weekend & more", "until": "Sunday"}


def split_payment(ledger: Ledger, clock: ManualClock, account: str = "alice") -> str:
    """$3.00 bonus, $5.00 store credit, $5.00 cash, then a $10.00 purchase: one
    transaction over three funds."""
    expires = clock.now() + timedelta(days=30)
    ledger.wallet.credit("shop", account, "cash", 500, txn_id=f"cash-{account}")
    ledger.wallet.grant("shop", account, 300, expires_at=expires, txn_id=f"bonus-{account}")
    ledger.wallet.credit("shop", account, "store_credit", 500, txn_id=f"gift-{account}")
    clock.advance(timedelta(hours=2))
    ledger.wallet.debit("shop", account, 1_000, txn_id=f"pay-{account}", description="groceries")
    clock.advance(timedelta(hours=2))
    return f"pay-{account}"


def seed(ledger: Ledger, clock: ManualClock, reports_dir: Path, *, rich: bool = True) -> Seeded:
    """Seed program ``shop`` (created already); ``clock`` moves forward ~2 days a posting.

    ``rich=False`` keeps it to a handful of writes (DynamoDB Local is slow).
    """
    with LOYALTY.open("rb") as fh:
        ledger.loyalty.configure("shop", tomllib.load(fh))
    ledger.accounts.open("shop", "alice")
    ledger.accounts.open("shop", "bob")
    steps = 8 if rich else 2
    for i in range(steps):
        ledger.transactions.credit("shop", "alice", "cash", 2_000 + 350 * i, txn_id=f"top-{i}")
        clock.advance(timedelta(days=1, hours=7))
        if i % 3 == 2:
            ledger.transactions.debit("shop", "alice", "cash", 1_500, txn_id=f"buy-{i}")
            clock.advance(timedelta(hours=5))
    ledger.loyalty.earn("shop", "alice", "order-1001", 125_000)
    if rich:
        split_payment(ledger, clock)
    ledger.wallet.authorize("shop", "alice", 700, hold_id="hold-1", description="taxi ride")
    note = ledger.notifications.add("shop", "alice", "Promo", PROMO)
    if rich:
        ledger.notifications.add("shop", "alice", "Welcome", {"text": "hello"})
        ledger.loyalty.earn("shop", "bob", "order-1002", 9_900)
        start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
        ledger.billing.configure("shop", grace_minutes=5, start=start)
        ledger.billing.ingest(
            "shop",
            "rec-1",
            partner="acme",
            order_id="order-1001",
            amount=125_000,
            currency="USD",
            rate="0.05",
            time=start + timedelta(minutes=20),
        )
        ledger.billing.reports.run(
            "shop", sink=DirectorySink(str(reports_dir)), interval="1h", max_windows=2
        )
    _, admin_secret = ledger.keys.create("shop", "admin", "support desk")
    _, read_secret = ledger.keys.create("shop", "read,write", "backend")
    return Seeded(admin_secret, read_secret, "alice", "order-1001", "hold-1", note.id)


def customer(ledger: Ledger, clock: ManualClock, account: str) -> None:
    """A customer a support agent works on: a split payment, two active holds
    (``hold-{account}`` $7.00 and ``hold2-{account}`` $4.00), points, and two active
    notifications (``Promo`` with markup in its payload, ``Welcome``)."""
    ledger.accounts.open("shop", account)
    ledger.transactions.credit("shop", account, "cash", 5_000, txn_id=f"top-{account}")
    ledger.transactions.credit("shop", account, "points", 1_250, txn_id=f"pts-{account}")
    clock.advance(timedelta(hours=1))
    split_payment(ledger, clock, account)
    ledger.wallet.authorize("shop", account, 700, hold_id=f"hold-{account}", description="taxi")
    ledger.wallet.authorize("shop", account, 400, hold_id=f"hold2-{account}", description="cafe")
    ledger.notifications.add("shop", account, "Promo", PROMO)
    ledger.notifications.add("shop", account, "Welcome", {"text": "hello", "lang": "en"})

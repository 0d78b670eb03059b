"""Arguments and printing shared by the wallet commands."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from tallybook.cli.options import Number, iso_time
from tallybook.cli.output import console, print_json, time_text
from tallybook.domain.wallet import Hold
from tallybook.errors import ValidationError
from tallybook.services.wallet.holds import HoldResult
from tallybook.services.wallet.records import WalletTransaction

AccountArg = Annotated[str, typer.Argument(help="Account (owner) id.")]
AmountArg = Annotated[int, typer.Argument(help="Amount in minor units (cents).", parser=Number())]
HoldArg = Annotated[str, typer.Argument(help="Hold id (the id given to authorize).")]


def when(text: str | None, days: int | None, what: str) -> datetime | None:
    """The time ``--{what}`` gives, or None for ``--{what}-days`` (which goes to the
    service as given: a retry on another day is then the same request)."""
    if (text is None) == (days is None):
        raise ValidationError(f"give exactly one of --{what} or --{what}-days")
    return iso_time(text, f"--{what}")


def print_txn(t: WalletTransaction, as_json: bool) -> None:
    if as_json:
        print_json(t)
        return
    moved = ", ".join(f"{f} {a:+d}" for f, a in t.funds.items()) or "no balance change"
    again = " (replay: first result)" if t.replay else ""
    charge = f"; charged {t.charge['amount']} externally" if t.charge else ""
    console.print(f"{t.type} {t.id}: {moved}{charge}; available {availability(t)}{again}")


def availability(t: WalletTransaction) -> str:
    """``bonus 0, store_credit 0, cash 2500 (total 2500)``"""
    funds = ", ".join(f"{f} {a}" for f, a in t.availability.items() if f != "total")
    total = t.availability.get("total")
    return f"{funds} (total {total})" if funds else "-"


def print_hold(h: Hold, as_json: bool) -> None:
    if as_json:
        print_json(h)
        return
    funds = ", ".join(f"{f} {a}" for f, a in h.amounts.items())
    captured = f", captured {h.captured}" if h.captured else ""
    console.print(
        f"hold {h.id} of {h.account} ({h.kind}): {h.status}, {funds}{captured}; "
        f"deadline {time_text(h.deadline)}"
    )


def print_result(r: HoldResult, as_json: bool) -> None:
    if as_json:
        print_json(r)
        return
    print_hold(r.hold, False)
    if r.transaction is not None:
        print_txn(r.transaction, False)

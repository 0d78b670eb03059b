"""Wallet read commands (``tallybook wallet balance|grants|hold|holds|transactions|transaction|
check``), registered on the ``wallet`` sub-app by :mod:`tallybook.cli.wallet`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from tallybook.cli.ledger import JsonOption, ProgramOption
from tallybook.cli.options import Number, StoreOption
from tallybook.cli.output import console, next_page, open_ledger, print_json, table
from tallybook.cli.wallet_output import AccountArg, HoldArg, print_hold, print_txn


def balance(
    account: AccountArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per fund: total, withheld (pending) and available; bonus counts unexpired grants.

    Example: tallybook wallet balance alice --program shop
    """
    with open_ledger(store, create=False) as ledger:
        view = ledger.wallet.balance(program, account)
    if as_json:
        print_json(view)
        return
    rows = [[f.fund, f.unit, f.total, f.withheld, f.available] for f in view.funds]
    table(f"wallet of {account}", ["fund", "unit", "total", "withheld", "available"], rows)
    console.print(f"total available: {view.total_available}")


def grants(
    account: AccountArg,
    program: ProgramOption,
    expired: Annotated[bool, typer.Option("--expired", help="Include expired grants.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List bonus grants, earliest expiry first.

    Example: tallybook wallet grants alice --program shop
    """
    with open_ledger(store, create=False) as ledger:
        found = ledger.wallet.grants(program, account, include_expired=expired)
    if as_json:
        print_json(found)
        return
    rows = [[g.id, g.awarded, g.available, g.expires_at] for g in found]
    table(f"bonus grants of {account}", ["grant", "awarded", "available", "expires"], rows)


def hold(
    hold_id: HoldArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one hold (expiring it first if it is past its deadline).

    Example: tallybook wallet hold h-1 -p shop
    """
    with open_ledger(store, create=False) as ledger:
        h = ledger.wallet.hold(program, hold_id)
    print_hold(h, as_json)


def holds(
    account: AccountArg,
    program: ProgramOption,
    active: Annotated[bool, typer.Option("--active", help="Only active holds.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List an owner's holds and held credits, newest first.

    Example: tallybook wallet holds alice --active -p shop
    """
    with open_ledger(store, create=False) as ledger:
        found = ledger.wallet.holds(program, account, active_only=active)
    if as_json:
        print_json(found)
        return
    rows = [[h.id, h.kind, h.status, h.amount, h.captured, h.deadline] for h in found]
    table(f"holds of {account}", ["hold", "kind", "status", "amount", "captured", "deadline"], rows)


def transactions(
    account: AccountArg,
    program: ProgramOption,
    limit: Annotated[
        int, typer.Option(help="Transactions per page (1-1000).", parser=Number())
    ] = 20,
    cursor: Annotated[str | None, typer.Option(help="Cursor from the previous page.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """An owner's transaction records, newest first, with the resulting availability.

    'charged' is the part of a debit charged to the external payment method
    (it never passed through the wallet's funds).

    Example: tallybook wallet transactions alice -p shop
    """
    with open_ledger(store, create=False) as ledger:
        page = ledger.wallet.transactions(program, account, limit=limit, cursor=cursor)
    if as_json:
        print_json(page)
        return
    rows = [
        [
            t.created_at,
            t.id,
            t.type,
            " ".join(f"{f}:{a:+d}" for f, a in t.funds.items()),
            t.charge["amount"] if t.charge else "",
            t.availability.get("total"),
        ]
        for t in page.transactions
    ]
    columns = ["at", "id", "type", "funds", "charged", "available"]
    table(f"transactions of {account}", columns, rows)
    next_page(page.cursor)


def transaction(
    txn_id: Annotated[str, typer.Argument(help="Transaction id.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """One transaction record: per-fund breakdown and resulting availability.

    Example: tallybook wallet transaction order-77 -p shop
    """
    with open_ledger(store, create=False) as ledger:
        t = ledger.wallet.transaction(program, txn_id)
    print_txn(t, as_json)


def check(
    account: AccountArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify the wallet invariants of an owner; exit 1 on any violation.

    Withheld amounts equal the active holds, the bonus fund equals its grants
    plus what holds reserve, no fund is below zero available, no charge intent
    outlived reconcile, and the head's marks agree with the rows (what
    ``tallybook check`` leaves to the wallet).

    Example: tallybook wallet check alice -p shop
    """
    with open_ledger(store, create=False) as ledger:
        problems = ledger.wallet.check(program, account)
    if as_json:
        print_json({"account": account, "ok": not problems, "violations": problems})
    else:
        for problem in problems:
            console.print(f"[red]violation[/red] {escape(str(problem))}", markup=True)
        console.print(
            "[green]ok[/green]" if not problems else f"[red]{len(problems)} violation(s)[/red]",
            markup=True,
        )
    if problems:
        sys.exit(1)

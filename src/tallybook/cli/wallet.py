"""Wallet commands (``tallybook wallet ...`` and ``tallybook reconcile``): twins of
``ledger.wallet``.

The charge hook for ``debit --on-shortfall charge`` comes from
``$TALLYBOOK_CHARGE_PROCESSOR`` (``fake`` in development; see services/charges.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn

from tallybook.cli.ledger import JsonOption, ProgramOption
from tallybook.cli.options import StoreOption
from tallybook.cli.output import console, open_ledger, print_json, table
from tallybook.domain.wallet import Hold
from tallybook.errors import ValidationError
from tallybook.services.wallet_holds import HoldResult
from tallybook.services.wallet_records import WalletTransaction

app = typer.Typer(
    help="Wallet: cash, store credit and bonus grants; debits, holds, held credits.",
    no_args_is_help=True,
)

AccountArg = Annotated[str, typer.Argument(help="Account (owner) id.")]
AmountArg = Annotated[int, typer.Argument(help="Amount in minor units (cents).")]
TxnOption = Annotated[
    str, typer.Option("--txn-id", help="Idempotency key: a replay returns the first result.")
]
HoldArg = Annotated[str, typer.Argument(help="Hold id (the id given to authorize).")]


def _when(text: str | None, days: int | None, what: str) -> datetime:
    if (text is None) == (days is None):
        raise ValidationError(f"give exactly one of --{what} or --{what}-days")
    if days is not None:
        return datetime.now(UTC) + timedelta(days=days)
    assert text is not None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            f"--{what} must be an ISO time such as 2026-05-01T00:00:00Z"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _print_txn(t: WalletTransaction, as_json: bool) -> None:
    if as_json:
        print_json(t)
        return
    moved = ", ".join(f"{f} {a:+d}" for f, a in t.funds.items()) or "no balance change"
    again = " (replay: first result)" if t.replay else ""
    charge = f"; charged {t.charge['amount']} externally" if t.charge else ""
    console.print(f"{t.type} {t.id}: {moved}{charge}; available {t.availability}{again}")


def _print_hold(h: Hold, as_json: bool) -> None:
    if as_json:
        print_json(h)
        return
    funds = ", ".join(f"{f} {a}" for f, a in h.amounts.items())
    captured = f", captured {h.captured}" if h.captured else ""
    console.print(
        f"hold {h.id} of {h.account} ({h.kind}): {h.status}, {funds}{captured}; "
        f"deadline {h.deadline.isoformat()}"
    )


def _print_result(r: HoldResult, as_json: bool) -> None:
    if as_json:
        print_json(r)
        return
    _print_hold(r.hold, False)
    if r.transaction is not None:
        _print_txn(r.transaction, False)


@app.command("balance")
def balance(
    account: AccountArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per fund: total, withheld (pending) and available; bonus counts unexpired grants.

    Example: tallybook wallet balance alice --program shop
    """
    with open_ledger(store) as ledger:
        view = ledger.wallet.balance(program, account)
    if as_json:
        print_json(view)
        return
    rows = [[f.fund, f.unit, f.total, f.withheld, f.available] for f in view.funds]
    table(f"wallet of {account}", ["fund", "unit", "total", "withheld", "available"], rows)
    console.print(f"total available: {view.total_available}")


@app.command("grants")
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
    with open_ledger(store) as ledger:
        found = ledger.wallet.grants(program, account, include_expired=expired)
    if as_json:
        print_json(found)
        return
    rows = [[g.id, g.awarded, g.available, g.expires_at.isoformat()] for g in found]
    table(f"bonus grants of {account}", ["grant", "awarded", "available", "expires"], rows)


@app.command("grant")
def grant(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    txn_id: TxnOption,
    expires: Annotated[str | None, typer.Option(help="Expiry (ISO time).")] = None,
    expires_days: Annotated[int | None, typer.Option(help="Expiry in days from now.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Award a bonus grant (from @issuance) that expires; the grant id is --txn-id.

    Example: tallybook wallet grant alice 500 --expires-days 30 --txn-id promo-1 -p shop
    """
    when = _when(expires, expires_days, "expires")
    with open_ledger(store) as ledger:
        t = ledger.wallet.grant(program, account, amount, expires_at=when, txn_id=txn_id)
    _print_txn(t, as_json)


@app.command("credit")
def credit(
    account: AccountArg,
    fund: Annotated[str, typer.Argument(help="cash or store_credit.")],
    amount: AmountArg,
    program: ProgramOption,
    txn_id: TxnOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Credit cash or store credit from outside the program.

    Example: tallybook wallet credit alice cash 2500 --txn-id topup-7 -p shop
    """
    with open_ledger(store) as ledger:
        t = ledger.wallet.credit(program, account, fund, amount, txn_id=txn_id)
    _print_txn(t, as_json)


@app.command("credit-held")
def credit_held(
    account: AccountArg,
    fund: Annotated[str, typer.Argument(help="cash or store_credit.")],
    amount: AmountArg,
    program: ProgramOption,
    txn_id: TxnOption,
    release: Annotated[str | None, typer.Option(help="Release time (ISO).")] = None,
    release_days: Annotated[int | None, typer.Option(help="Release in days from now.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Credit now but keep it pending until a date (sale proceeds); the hold id is --txn-id.

    Example: tallybook wallet credit-held alice cash 9000 --release-days 14 --txn-id sale-3 -p shop
    """
    when = _when(release, release_days, "release")
    with open_ledger(store) as ledger:
        r = ledger.wallet.credit_held(
            program, account, fund, amount, release_at=when, txn_id=txn_id
        )
    _print_result(r, as_json)


@app.command("debit")
def debit(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    txn_id: TxnOption,
    on_shortfall: Annotated[
        str, typer.Option(help="reject, or charge the deficit to the external payment method.")
    ] = "reject",
    order_id: Annotated[str | None, typer.Option(help="Order id to record.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Spend bonus (earliest expiry first), then store credit, then cash.

    Example: tallybook wallet debit alice 1299 --txn-id order-77 --on-shortfall charge -p shop
    """
    if on_shortfall not in ("reject", "charge"):
        raise ValidationError("--on-shortfall must be reject or charge")
    with open_ledger(store) as ledger:
        t = ledger.wallet.debit(
            program,
            account,
            amount,
            txn_id=txn_id,
            order_id=order_id,
            on_shortfall="charge" if on_shortfall == "charge" else "reject",
        )
    _print_txn(t, as_json)


@app.command("authorize")
def authorize(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    hold_id: Annotated[str, typer.Option("--hold-id", help="Id of the new hold (idempotent).")],
    expires_in: Annotated[
        int | None, typer.Option(help="Seconds until the hold expires [default: 7 days].")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Withhold AMOUNT in spend order until capture, void or the deadline.

    Example: tallybook wallet authorize alice 5000 --hold-id h-1 --expires-in 3600 -p shop
    """
    with open_ledger(store) as ledger:
        r = ledger.wallet.authorize(
            program, account, amount, hold_id=hold_id, expires_in=expires_in
        )
    _print_result(r, as_json)


@app.command("capture")
def capture(
    hold_id: HoldArg,
    program: ProgramOption,
    amount: Annotated[
        int | None, typer.Option(help="Amount to capture [default: all]; the rest is released.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Capture all or part of a hold (idempotent).

    Example: tallybook wallet capture h-1 --amount 4200 -p shop
    """
    with open_ledger(store) as ledger:
        r = ledger.wallet.capture(program, hold_id, amount)
    _print_result(r, as_json)


@app.command("void")
def void(
    hold_id: HoldArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Release a hold (idempotent).

    Example: tallybook wallet void h-1 -p shop
    """
    with open_ledger(store) as ledger:
        r = ledger.wallet.void(program, hold_id)
    _print_result(r, as_json)


@app.command("hold")
def hold(
    hold_id: HoldArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one hold (expiring it first if it is past its deadline).

    Example: tallybook wallet hold h-1 -p shop
    """
    with open_ledger(store) as ledger:
        h = ledger.wallet.hold(program, hold_id)
    _print_hold(h, as_json)


@app.command("holds")
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
    with open_ledger(store) as ledger:
        found = ledger.wallet.holds(program, account, active_only=active)
    if as_json:
        print_json(found)
        return
    rows = [[h.id, h.kind, h.status, h.amount, h.captured, h.deadline.isoformat()] for h in found]
    table(f"holds of {account}", ["hold", "kind", "status", "amount", "captured", "deadline"], rows)


@app.command("transactions")
def transactions(
    account: AccountArg,
    program: ProgramOption,
    limit: Annotated[int, typer.Option(help="Page size.")] = 20,
    cursor: Annotated[str | None, typer.Option(help="Cursor from the previous page.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """An owner's transaction records, newest first, with the resulting availability.

    Example: tallybook wallet transactions alice -p shop
    """
    with open_ledger(store) as ledger:
        page = ledger.wallet.transactions(program, account, limit=limit, cursor=cursor)
    if as_json:
        print_json(page)
        return
    rows = [
        [
            t.created_at.isoformat(),
            t.id,
            t.type,
            " ".join(f"{f}:{a:+d}" for f, a in t.funds.items()),
            t.availability.get("total"),
        ]
        for t in page.transactions
    ]
    table(f"transactions of {account}", ["at", "id", "type", "funds", "available"], rows)
    if page.cursor:
        console.print(f"next page: --cursor {page.cursor}")


@app.command("transaction")
def transaction(
    txn_id: Annotated[str, typer.Argument(help="Transaction id.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """One transaction record: per-fund breakdown and resulting availability.

    Example: tallybook wallet transaction order-77 -p shop
    """
    with open_ledger(store) as ledger:
        t = ledger.wallet.transaction(program, txn_id)
    _print_txn(t, as_json)


def reconcile(
    program: ProgramOption, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Resolve wallet leftovers: charges in flight too long (refunded), holds without a
    transaction record, holds and held credits past their deadline, expired bonus grants.

    Safe to run while traffic flows, and again: every step is a conditional write.

    Example: tallybook reconcile --program shop
    """
    with (
        open_ledger(store) as ledger,
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description} {task.completed} rows"),
            console=console,
            transient=True,
            disable=as_json,
        ) as bar,
    ):
        task = bar.add_task("reconciling", total=None)
        report = ledger.wallet.reconcile(program, progress=lambda n: bar.advance(task, n))
    if as_json:
        print_json(report)
        return
    lines = report.lines()
    for line in lines:
        console.print(line)
    console.print(f"reconcile: {len(lines)} action(s)" if lines else "reconcile: nothing to do")

"""Wallet commands (``tallybook wallet ...`` and ``tallybook reconcile``): twins of
``ledger.wallet``.

The charge hook for ``debit --on-shortfall charge`` comes from
``$TALLYBOOK_CHARGE_PROCESSOR`` (``fake`` in development; see services/wallet/charges.py).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.progress import SpinnerColumn, TextColumn

from tallybook.cli import wallet_reads
from tallybook.cli.ledger import JsonOption, ProgramOption
from tallybook.cli.options import (
    NUMERIC_ARGS,
    Number,
    NumericArgsCommand,
    StoreOption,
    TxnIdAlias,
    TxnOption,
    txn_of,
)
from tallybook.cli.output import console, open_ledger, print_json, progress_bar
from tallybook.cli.wallet_output import (
    AccountArg,
    AmountArg,
    HoldArg,
    print_result,
    print_txn,
    when,
)
from tallybook.errors import ValidationError

app = typer.Typer(
    help="Wallet: cash, store credit and bonus grants; debits, holds, held credits.",
    no_args_is_help=True,
)


app.command("balance")(wallet_reads.balance)
app.command("grants")(wallet_reads.grants)


@app.command("grant", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def grant(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    expires: Annotated[str | None, typer.Option(help="Expiry (ISO time).")] = None,
    expires_days: Annotated[
        int | None, typer.Option(help="Expiry in days from now.", parser=Number())
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Award a bonus grant (from @issuance) that expires; the grant id is --txn.

    Example: tallybook wallet grant alice 500 --expires-days 30 --txn promo-1 -p shop
    """
    expires_at = when(expires, expires_days, "expires")
    with open_ledger(store) as ledger:
        t = ledger.wallet.grant(
            program,
            account,
            amount,
            # --expires-days goes as given, so a retry on another day is the same request
            expires_at=expires_at,
            expires_in_days=expires_days,
            txn_id=txn_of(txn, txn_id),
        )
    print_txn(t, as_json)


@app.command("credit", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def credit(
    account: AccountArg,
    fund: Annotated[str, typer.Argument(help="cash or store_credit.")],
    amount: AmountArg,
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Credit cash or store credit from outside the program.

    Example: tallybook wallet credit alice cash 2500 --txn topup-7 -p shop
    """
    with open_ledger(store) as ledger:
        t = ledger.wallet.credit(program, account, fund, amount, txn_id=txn_of(txn, txn_id))
    print_txn(t, as_json)


@app.command("credit-held", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def credit_held(
    account: AccountArg,
    fund: Annotated[str, typer.Argument(help="cash or store_credit.")],
    amount: AmountArg,
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    release: Annotated[str | None, typer.Option(help="Release time (ISO).")] = None,
    release_days: Annotated[
        int | None, typer.Option(help="Release in days from now.", parser=Number())
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Credit now but keep it pending until a date (sale proceeds); the hold id is --txn.

    Example: tallybook wallet credit-held alice cash 9000 --release-days 14 --txn sale-3 -p shop
    """
    release_at = when(release, release_days, "release")
    with open_ledger(store) as ledger:
        r = ledger.wallet.credit_held(
            program,
            account,
            fund,
            amount,
            # --release-days goes as given, so a retry on another day is the same request
            release_at=release_at,
            release_in_days=release_days,
            txn_id=txn_of(txn, txn_id),
        )
    print_result(r, as_json)


@app.command("debit", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def debit(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    on_shortfall: Annotated[
        str, typer.Option(help="reject, or charge the deficit to the external payment method.")
    ] = "reject",
    order_id: Annotated[
        str | None, typer.Option("--order-id", "--order", help="Order id to record.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Spend bonus (earliest expiry first), then store credit, then cash.

    Example: tallybook wallet debit alice 1299 --txn order-77 --on-shortfall charge -p shop
    """
    if on_shortfall not in ("reject", "charge"):
        raise ValidationError("--on-shortfall must be reject or charge")
    with open_ledger(store) as ledger:
        t = ledger.wallet.debit(
            program,
            account,
            amount,
            txn_id=txn_of(txn, txn_id),
            order_id=order_id,
            on_shortfall="charge" if on_shortfall == "charge" else "reject",
        )
    print_txn(t, as_json)


@app.command("authorize", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def authorize(
    account: AccountArg,
    amount: AmountArg,
    program: ProgramOption,
    hold_id: Annotated[str, typer.Option("--hold-id", help="Id of the new hold (idempotent).")],
    expires_in: Annotated[
        int | None,
        typer.Option(help="Seconds until the hold expires (default: 7 days).", parser=Number()),
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
    print_result(r, as_json)


@app.command("capture")
def capture(
    hold_id: HoldArg,
    program: ProgramOption,
    amount: Annotated[
        int | None,
        typer.Option(
            help="Amount to capture (default: all); the rest is released.", parser=Number()
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Capture all or part of a hold (idempotent).

    Example: tallybook wallet capture h-1 --amount 4200 -p shop
    """
    with open_ledger(store) as ledger:
        r = ledger.wallet.capture(program, hold_id, amount)
    print_result(r, as_json)


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
    print_result(r, as_json)


app.command("hold")(wallet_reads.hold)
app.command("holds")(wallet_reads.holds)
app.command("transactions")(wallet_reads.transactions)
app.command("transaction")(wallet_reads.transaction)
app.command("check")(wallet_reads.check)


def reconcile(
    program: ProgramOption, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Resolve wallet leftovers: stale charges, orphan and overdue holds, expired grants.

    Charges in flight too long are refunded; holds without a transaction record,
    holds and held credits past their deadline, and expired bonus grants are settled.

    Safe to run while traffic flows, and again: every step is a conditional write.
    A refund the charge processor fails (or a charge intent that does not read)
    is listed, the rest is done, and the command exits 1: the next run refunds
    that charge (a malformed intent waits for a fix; wallet check names it).

    Example: tallybook reconcile --program shop
    """
    with (
        open_ledger(store) as ledger,
        progress_bar(
            SpinnerColumn(),
            TextColumn("{task.description} {task.completed} rows"),
            # on stderr, as every other command's progress: stdout is the result only
            disable=as_json,
        ) as bar,
    ):
        task = bar.add_task("reconciling", total=None)
        report = ledger.wallet.reconcile(program, progress=lambda n: bar.advance(task, n))
    if as_json:
        print_json(report)
    else:
        lines = report.lines()
        for line in lines:
            console.print(line)
        undone = report.undone()
        done = len(lines) - len(report.failed_refunds) - len(report.skipped)
        summary = f"reconcile: {done} action(s)" if done else "reconcile: nothing to do"
        console.print("; ".join([summary, *undone]))
    if report.undone():
        sys.exit(1)

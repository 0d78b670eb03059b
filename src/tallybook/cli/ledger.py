"""Ledger commands: ``account open|show``, ``post``, ``history``, ``check``."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape

from tallybook.cli.options import (
    Number,
    StoreOption,
    TxnIdAlias,
    TxnOption,
    iso_time,
    parse_integer,
    shown,
    txn_of,
)
from tallybook.cli.output import console, next_page, open_ledger, print_json, progress_bar, table
from tallybook.errors import ValidationError

ProgramOption = Annotated[
    str,
    typer.Option(
        "--program", "-p", envvar="TALLYBOOK_PROGRAM", help="Program id ($TALLYBOOK_PROGRAM)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

account_app = typer.Typer(
    help="Open accounts and show their balances.",
    epilog="Example: tallybook account open alice --program shop",
    no_args_is_help=True,
)


@account_app.command("open")
def account_open(
    account: Annotated[str, typer.Argument(help="Account (owner) id inside the program.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Open ACCOUNT with zero balances in every fund of the program (idempotent).

    Example: tallybook account open alice --program shop
    """
    with open_ledger(store) as ledger:
        acct, created = ledger.accounts.open(program, account)
        if as_json:
            print_json({"account": acct.id, "program": acct.program, "created": created})
        else:
            console.print(f"account {acct.id} {'opened' if created else 'was already open'}")


@account_app.command("show")
def account_show(
    account: Annotated[str, typer.Argument(help="Account id.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every fund's balance, held and available amount (one storage read).

    Example: tallybook account show alice --program shop
    """
    with open_ledger(store, create=False) as ledger:
        balances = ledger.accounts.balances(program, account)
        if as_json:
            print_json({"account": account, "program": program, "balances": balances})
            return
        table(
            f"{program}/{account}",
            ["fund", "unit", "balance", "held", "available"],
            [[b.fund, b.unit, b.balance, b.held, b.available] for b in balances],
        )


class PostKind(StrEnum):
    credit = "credit"
    debit = "debit"
    transfer = "transfer"
    adjust = "adjust"


def _metadata(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValidationError(f"--meta takes KEY=VALUE, got {pair!r}")
        if key in out:
            raise ValidationError(f"--meta {key} is given more than once")
        out[key] = value
    return out


def post(
    kind: Annotated[PostKind, typer.Argument(help="credit, debit, transfer or adjust.")],
    account: Annotated[str, typer.Argument(help="Account to credit/debit (transfer: source).")],
    fund: Annotated[str, typer.Argument(help="Fund name, e.g. cash or points.")],
    amount: Annotated[str, typer.Argument(help="Integer minor units (adjust: signed, e.g. -5).")],
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    to: Annotated[str | None, typer.Option("--to", help="Transfer destination account.")] = None,
    order: Annotated[str | None, typer.Option("--order", "--order-id", help="Order id.")] = None,
    description: Annotated[
        str | None,
        typer.Option("--description", "-d", help="Free text kept with the transaction (max 500)."),
    ] = None,
    meta: Annotated[list[str], typer.Option("--meta", help="KEY=VALUE metadata, repeatable.")] = [],  # noqa: B006
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Post a transaction exactly once per --txn id; a replay prints the original.

    Examples:
      tallybook post credit alice cash 500 --txn t-1 --program shop
      tallybook post transfer alice cash 200 --to bob --txn t-2 --program shop
      tallybook post adjust alice cash -50 --txn fix-1 --program shop
    """
    try:
        value = parse_integer(amount)
    except ValueError as exc:
        if amount.isascii() and amount.lstrip("-").isdigit():  # digits, too many
            raise ValidationError(f"amount {exc}") from None
        raise ValidationError(
            f"amount must be an integer number of minor units in ASCII digits, "
            f"got {shown(amount)!r}"
        ) from None
    metadata = _metadata(meta)
    txn = txn_of(txn, txn_id)
    with open_ledger(store) as ledger:
        t = ledger.transactions
        if kind is PostKind.transfer:
            if to is None:
                raise ValidationError("a transfer needs --to ACCOUNT")
            result = t.transfer(
                program,
                account,
                to,
                fund,
                value,
                txn_id=txn,
                description=description,
                metadata=metadata,
            )
        elif to is not None:
            raise ValidationError("--to applies to transfers only")
        elif kind is PostKind.credit:
            result = t.credit(
                program,
                account,
                fund,
                value,
                txn_id=txn,
                order_id=order,
                description=description,
                metadata=metadata,
            )
        elif kind is PostKind.debit:
            result = t.debit(
                program,
                account,
                fund,
                value,
                txn_id=txn,
                order_id=order,
                description=description,
                metadata=metadata,
            )
        else:
            result = t.adjust(
                program,
                account,
                fund,
                value,
                txn_id=txn,
                description=description,
                metadata=metadata,
            )
        if as_json:
            print_json(result)
            return
        note = " (replay: already applied)" if result.replay else ""
        console.print(f"transaction {result.id} {result.type}{note}")
        table(
            "postings",
            ["account", "fund", "amount", "balance", "seq"],
            [[leg.account, leg.fund, leg.amount, leg.balance, leg.seq] for leg in result.legs],
        )


def history(
    account: Annotated[str, typer.Argument(help="Account id.")],
    program: ProgramOption,
    fund: Annotated[str, typer.Option("--fund", "-f", help="Fund name.")],
    oldest_first: Annotated[
        bool, typer.Option("--oldest-first", help="Oldest entries first.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(help="From this time (inclusive), ISO 8601; UTC if no zone."),
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Up to this time (exclusive), ISO 8601; UTC if no zone.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Entries per page (1-1000).", parser=Number())] = 50,
    cursor: Annotated[str | None, typer.Option(help="Cursor printed by the previous page.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one page of a fund's history, newest first by default.

    Example: tallybook history alice --fund cash --program shop --limit 20
    """
    start, end = iso_time(since, "--since"), iso_time(until, "--until")
    with open_ledger(store, create=False) as ledger:
        page = ledger.accounts.history(
            program,
            account,
            fund,
            newest_first=not oldest_first,
            since=start,
            until=end,
            limit=limit,
            cursor=cursor,
        )
        if as_json:
            print_json({"entries": page.entries, "cursor": page.cursor})
            return
        table(
            f"{program}/{account}/{fund}",
            ["seq", "created_at", "type", "amount", "balance", "txn_id", "order_id"],
            [
                [e.seq, e.created_at, e.type, e.amount, e.balance, e.txn_id, e.order_id]
                for e in page.entries
            ],
        )
        next_page(page.cursor)


def check(
    program: ProgramOption,
    account: Annotated[
        str | None, typer.Option("--account", "-a", help="Check one account only.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify invariants 1, 2, 3, 5 and 6; exit 1 on any violation.

    Checks that every balance equals the sum of its entries with gapless
    sequence numbers, that what a fund withholds is its active holds and its
    available amount is not below zero, that each transaction was applied
    once, that every unit's total is conserved and that an account has at most
    one active notification per type, over one account or a whole program
    (with a progress bar). A charge intent past its grace is reported too, as
    a recovery reconcile will make (and exits 1 until it has run), and so are
    loyalty lots that do not match the member's counters and a tier without
    the member's row. A damaged program item is the one violation. Safe to run
    while the program is in use (an account that changes during each of its
    reads is reported as not checked; a posting of several accounts half read is
    counted whole once the other account holds it); while the accounts keep
    changing and their sum is off for another reason, invariant 5 may be
    reported as not checked (exit 1): run it again. Accounts
    are found in the account directory (never a scan), and one missing from it
    only through a checked transaction naming it.

    Example: tallybook check --program shop
    """
    with open_ledger(store, create=False) as ledger:
        if account is not None:
            report = ledger.check.account(program, account)
        else:
            total = ledger.check.count_accounts(program)
            with progress_bar() as progress:
                task = progress.add_task("checking accounts", total=total)
                report = ledger.check.program(program, progress=lambda n: progress.advance(task, n))
        if as_json:
            print_json(report)
        else:
            console.print(
                f"checked {report.accounts} accounts, {report.entries} entries, "
                f"{report.transactions} transaction references"
            )
            for v in report.violations:
                console.print(f"[red]violation[/red] {escape(str(v))}", markup=True)
            console.print(
                "[green]ok[/green]"
                if report.ok
                else f"[red]{len(report.violations)} violation(s)[/red]",
                markup=True,
            )
        if not report.ok:
            sys.exit(1)

"""``tallybook program create|show|threshold``: programs and their funds."""

from __future__ import annotations

from typing import Annotated

import typer

from tallybook.cli.options import NUMERIC_ARGS, Number, NumericArgsCommand, StoreOption
from tallybook.cli.output import console, open_ledger, print_json, table
from tallybook.errors import AlreadyExists
from tallybook.services.ledger.programs import check_program

app = typer.Typer(
    help="Create a program, show its funds, set a fund's low-balance threshold.",
    epilog="Example: tallybook program create shop --currency USD",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("create")
def create(
    program: Annotated[str, typer.Argument(help="Program id (letters, digits, . _ : -).")],
    name: Annotated[str | None, typer.Option("--name", help="Display name.")] = None,
    currency: Annotated[
        str | None,
        typer.Option(
            "--currency",
            help="Unit of the cash, store_credit and bonus funds (default USD).",
            show_default=False,
        ),
    ] = None,
    exist_ok: Annotated[
        bool,
        typer.Option(
            "--exist-ok",
            help="An existing PROGRAM is fine (exit 0) unless it differs in --currency or "
            "--name; for scripts run more than once.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create PROGRAM with the default funds: points, cash, store_credit, bonus.

    Without --exist-ok an existing PROGRAM is an error (exit 5).

    Example: tallybook program create shop --name "Shop rewards" --currency EUR
    """
    # bad input is refused before the store is opened, which may make its file
    check_program(program, name=name, currency=currency or "USD")
    with open_ledger(store, new=True) as ledger:
        try:
            p = ledger.programs.create(program, name=name, currency=currency or "USD")
            verb = "created"
        except AlreadyExists:
            if not exist_ok:
                raise
            p = ledger.programs.get(program, fresh=True)
            if (currency and currency != p.currency) or (name and name != p.name):
                raise AlreadyExists(
                    f"program {program} exists with currency {p.currency} and name "
                    f"{p.name!r}, which differ from those asked for"
                ) from None
            verb = "exists already"
        if as_json:
            print_json(p)
        else:
            console.print(f"program {p.id} {verb} ({len(p.funds)} funds, currency {p.currency})")


@app.command("show")
def show(
    program: Annotated[str, typer.Argument(help="Program id.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show PROGRAM's name, currency and funds.

    Example: tallybook program show shop
    """
    with open_ledger(store, create=False) as ledger:
        p = ledger.programs.get(program, fresh=True)
        if as_json:
            print_json(p)
            return
        table(
            f"{p.id} ({p.name}, {p.currency})",
            ["fund", "unit", "overdraft", "low balance below"],
            [[f.name, f.unit, f.allow_overdraft, f.low_balance_threshold] for f in p.funds],
        )


@app.command("threshold", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def threshold(
    program: Annotated[str, typer.Argument(help="Program id.")],
    fund: Annotated[str, typer.Argument(help="Fund name, e.g. cash.")],
    amount: Annotated[
        int | None,
        typer.Argument(
            help="Minor units; LowBalance is raised below it. Omit with --clear.",
            parser=Number(),
        ),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Raise no LowBalance for FUND.")] = False,
    store: StoreOption = None,
) -> None:
    """Set (or --clear) the balance below which FUND raises a LowBalance notification.

    A top-up above it removes the notification again. Applies from the next posting;
    an active LowBalance about FUND is dismissed now if FUND is at or above the new
    threshold, or the threshold is cleared.

    Example: tallybook program threshold shop cash 500
    """
    if (amount is None) == (not clear):
        raise typer.BadParameter("give AMOUNT or --clear", param_hint="AMOUNT")
    with open_ledger(store) as ledger:
        p = ledger.programs.set_low_balance_threshold(program, fund, None if clear else amount)
    spec = p.fund(fund)
    below = spec.low_balance_threshold if spec else None
    console.print(
        f"{program}/{fund}: "
        + (f"LowBalance below {below}" if below is not None else "no LowBalance")
    )

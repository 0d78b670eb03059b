"""Loyalty commands (``tallybook loyalty ...`` and ``tallybook expire``): twins of
``ledger.loyalty``."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

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
from tallybook.cli.output import (
    console,
    next_page,
    open_ledger,
    print_json,
    progress_bar,
    table,
    time_text,
)
from tallybook.domain.loyalty import instant
from tallybook.errors import ValidationError
from tallybook.services.loyalty.jobs import ExpiryReport
from tallybook.services.loyalty.service import load_toml

app = typer.Typer(
    help="Loyalty: rules, earn per order, redeem, tiers, expiring points.", no_args_is_help=True
)
config_app = typer.Typer(
    help="Load or show a program's loyalty rules.",
    epilog="Example: tallybook loyalty config load examples/loyalty.toml --program shop",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")

AccountArg = Annotated[str, typer.Argument(help="Account (member) id.")]


@config_app.command("load")
def config_load(
    file: Annotated[Path, typer.Argument(help="TOML file (see examples/loyalty.toml).")],
    program: Annotated[
        str | None,
        typer.Option(
            "--program",
            "-p",
            envvar="TALLYBOOK_PROGRAM",
            help="Program id ($TALLYBOOK_PROGRAM); not needed with --check.",
        ),
    ] = None,
    store: StoreOption = None,
    check_only: Annotated[
        bool, typer.Option("--check", help="Validate the file without storing it.")
    ] = False,
) -> None:
    """Validate a loyalty TOML file and store it as the program's rules.

    Example: tallybook loyalty config load examples/loyalty.toml --program shop
    (or --check to validate only)
    """
    cfg = load_toml(file)
    if check_only:
        console.print(f"{file}: valid ({len(cfg.tiers)} tiers, {len(cfg.campaigns)} campaigns)")
        return
    if program is None:
        raise ValidationError("give --program (or set $TALLYBOOK_PROGRAM), or --check")
    with open_ledger(store) as ledger:
        ledger.loyalty.configure(program, cfg)
    console.print(f"loyalty rules of {program} loaded from {file}")


@config_app.command("show")
def config_show(program: ProgramOption, store: StoreOption = None) -> None:
    """Print the program's loyalty rules as JSON (canonical form).

    Example: tallybook loyalty config show --program shop
    """
    with open_ledger(store, create=False) as ledger:
        print(json.dumps(ledger.loyalty.config(program).to_settings(), indent=2))


PartnerOption = Annotated[
    str | None,
    typer.Option(help="Partner or brand to credit in the rewards-issued report (metadata)."),
]


def _partner(partner: str | None) -> dict[str, str] | None:
    return {"partner": partner} if partner else None


@app.command("earn", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def earn(
    account: AccountArg,
    order_id: Annotated[str, typer.Argument(help="Order id: each order earns once.")],
    amount: Annotated[
        int, typer.Argument(help="Order amount in minor units (cents).", parser=Number())
    ],
    program: ProgramOption,
    currency: Annotated[
        str | None, typer.Option(help="Order currency (default: the program's).")
    ] = None,
    at: Annotated[
        str | None, typer.Option(help="When the order was placed, ISO time (default: now).")
    ] = None,
    partner: PartnerOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Earn points for an order, exactly once per ORDER_ID.

    Example: tallybook loyalty earn alice order-1001 4599 --partner acme --program shop
    """
    when: datetime | None = instant(at, "--at") if at else None
    with open_ledger(store) as ledger:
        r = ledger.loyalty.earn(
            program,
            account,
            order_id,
            amount,
            currency=currency,
            at=when,
            metadata=_partner(partner),
        )
    if as_json:
        print_json(r)
        return
    again = " (already earned: first result)" if r.replay else ""
    extra = f", campaigns {', '.join(r.campaigns)}" if r.campaigns else ""
    console.print(f"{account} earned {r.points} points for {order_id}{extra}; tier {r.tier}{again}")


@app.command("redeem", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)
def redeem(
    account: AccountArg,
    points: Annotated[int, typer.Argument(help="Points to spend.", parser=Number())],
    reward_id: Annotated[str, typer.Argument(help="Reward id.")],
    program: ProgramOption,
    txn: TxnOption = None,
    txn_id: TxnIdAlias = None,
    partner: PartnerOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Redeem POINTS for REWARD_ID, oldest points first.

    Example: tallybook loyalty redeem alice 500 mug --txn r-42 --program shop
    """
    with open_ledger(store) as ledger:
        r = ledger.loyalty.redeem(
            program,
            account,
            points,
            reward_id,
            txn_id=txn_of(txn, txn_id),
            metadata=_partner(partner),
        )
    if as_json:
        print_json(r)
        return
    console.print(f"{account} redeemed {r.points} points for {reward_id}; balance {r.balance}")


@app.command("tier")
def tier(
    account: AccountArg,
    program: ProgramOption,
    history: Annotated[bool, typer.Option("--history", help="List tier changes too.")] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Tier changes per page with --history (1-1000, default 50).", parser=Number()
        ),
    ] = None,
    cursor: Annotated[
        str | None, typer.Option(help="Cursor from the previous page of --history.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a member's tier, qualifying points and balance (and tier history).

    The history comes a page at a time, newest first; when there are more,
    prints `next page: --cursor ...` (`cursor` in --json).

    Example: tallybook loyalty tier alice --history --program shop
    """
    if not history and (limit is not None or cursor is not None):
        raise ValidationError("--limit and --cursor page the tier history: give --history")
    with open_ledger(store, create=False) as ledger:
        status = ledger.loyalty.status(program, account)
        page = (
            ledger.loyalty.tier_history(
                program, account, limit=50 if limit is None else limit, cursor=cursor
            )
            if history
            else None
        )
    changes, more = (page.changes, page.cursor) if page else ([], None)
    if as_json:
        print_json({"status": status, "history": changes, "cursor": more})
        return
    nxt = f"; {status.points_to_next_tier} points to {status.next_tier}" if status.next_tier else ""
    console.print(
        f"{account}: tier {status.tier}, qualifying points {status.qualifying_points}, "
        f"balance {status.balance}{nxt}"
    )
    if history:
        table(
            "tier history",
            ["at", "from", "to", "reason", "transaction"],
            [[c.at, c.previous, c.tier, c.reason, c.txn_id] for c in changes],
        )
        next_page(more)


@app.command("members")
def members(
    tier_name: Annotated[str, typer.Argument(metavar="TIER", help="Tier name.")],
    program: ProgramOption,
    limit: Annotated[int, typer.Option(help="Page size (1-1000).", parser=Number())] = 100,
    cursor: Annotated[str | None, typer.Option(help="Cursor from the previous page.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the members of TIER, one page at a time.

    Example: tallybook loyalty members gold --program shop --limit 50
    """
    with open_ledger(store, create=False) as ledger:
        page = ledger.loyalty.members(program, tier_name, limit=limit, cursor=cursor)
    if as_json:
        print_json(page)
        return
    table(
        f"tier {tier_name}",
        ["account", "points", "qualifying points"],
        [[m.account, m.points, m.qualifying_points] for m in page.members],
    )
    next_page(page.cursor)


@app.command("expiring")
def expiring(
    account: AccountArg,
    program: ProgramOption,
    days: Annotated[
        int | None,
        typer.Option(help="Horizon in days (default: the warning horizon).", parser=Number()),
    ] = None,
    limit: Annotated[int, typer.Option(help="Lots per page (1-1000).", parser=Number())] = 100,
    cursor: Annotated[str | None, typer.Option(help="Cursor from the previous page.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a member's points that expire within DAYS, oldest first.

    A page of lots at a time; the total counts every lot.

    Example: tallybook loyalty expiring alice --days 30 --program shop
    """
    with open_ledger(store, create=False) as ledger:
        page = ledger.loyalty.expiring_page(program, account, days=days, limit=limit, cursor=cursor)
    if as_json:
        print_json(page)
        return
    table(
        f"{account}: {page.points} points expiring",
        ["expires", "points", "order"],
        [[lot.expires or "never", lot.points, lot.order_id] for lot in page.lots],
    )
    next_page(page.cursor)


@app.command("order")
def order(
    order_id: Annotated[str, typer.Argument(help="Order id.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the earn transaction an order produced and its account.

    Example: tallybook loyalty order order-1001 --program shop
    """
    with open_ledger(store, create=False) as ledger:
        found = ledger.loyalty.order(program, order_id)
    if as_json:
        print_json(found)
        return
    console.print(
        f"order {order_id}: transaction {found.transaction.id}, account {found.account}, "
        f"{found.points} points at {time_text(found.transaction.created_at)}"
    )


@app.command("downgrade")
def downgrade(
    program: ProgramOption, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Apply the downgrade rule to every member above the base tier (a periodic job).

    Example: tallybook loyalty downgrade --program shop
    """
    with open_ledger(store) as ledger, progress_bar() as bar:
        task = bar.add_task("reviewing members", total=None)
        report = ledger.loyalty.review_tiers(
            program, progress=lambda done, _total: bar.update(task, completed=done)
        )
    if as_json:
        print_json(report)
        return
    console.print(f"reviewed {report.members} members, downgraded {report.downgraded}")


def expire(program: ProgramOption, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Expire loyalty points past their date and raise PointsExpiring warnings.

    Idempotent: reads only the days since the last run; running it twice
    expires nothing more. A member with a lot that does not read is skipped and
    listed, the others expire, and the command exits 1; the next run reads that
    member's day again (tallybook check names the lot).

    Example: tallybook expire --program shop
    """
    with open_ledger(store) as ledger, progress_bar() as bar:
        task = bar.add_task("expiring points", total=None)
        report = ledger.loyalty.expire(
            program, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    if as_json:
        print_json(report)
    else:
        _print_expiry(report)
    if report.skipped:
        sys.exit(1)


def _print_expiry(report: ExpiryReport) -> None:
    for line in report.skipped:
        console.print(f"skipped {line}")
    console.print(
        f"expired {report.points} points in {report.lots} lots of {report.accounts} accounts "
        f"({report.days} day(s) read); warned {report.warned} account(s)"
        + (
            f"; {report.warnings_failed} warning(s) failed (logged): run it again"
            if report.warnings_failed
            else ""
        )
        + (
            f"; {len(report.skipped)} member(s) skipped: see tallybook check"
            if report.skipped
            else ""
        )
    )

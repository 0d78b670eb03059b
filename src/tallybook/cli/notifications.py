"""``tallybook notifications add|list|dismiss|history|rules`` and ``tallybook events ingest``.

Twins of ``ledger.notifications`` (add, list, dismiss, dismiss_type, history,
rules/set_rules) and ``ledger.notifications.ingestor.ingest_lines``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from tallybook.cli.options import Number, StoreOption, iso_time
from tallybook.cli.output import (
    console,
    err_console,
    next_page,
    open_ledger,
    print_json,
    print_table,
    progress_bar,
    time_text,
)
from tallybook.domain.notifications import Notification, rules_to_settings
from tallybook.errors import ValidationError

ProgramOption = Annotated[
    str,
    typer.Option(
        "--program", "-p", envvar="TALLYBOOK_PROGRAM", help="Program id ($TALLYBOOK_PROGRAM)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
AccountArg = Annotated[str, typer.Argument(help="Account id inside the program.")]

app = typer.Typer(
    help="Per-account notifications: add, list active, dismiss, history, rules.",
    no_args_is_help=True,
)
events_app = typer.Typer(help="Inbound events that raise notifications.", no_args_is_help=True)


#: the longest payload a table shows (``--json`` gives it whole)
_PAYLOAD_CHARS = 200


def _table(title: str, items: list[Notification], *, history: bool = False) -> None:
    """Ids and types are never cut (they are what ``dismiss`` takes); payloads may be.

    The payload wraps, shortened past ``_PAYLOAD_CHARS``: a payload kept on one line
    took every column's width at 80 columns, leaving the id, type and time empty.
    """
    t = Table(title=title)
    t.add_column("id", no_wrap=True, min_width=29)
    t.add_column("type", overflow="fold")
    if history:
        t.add_column("status")
        t.add_column("dismissed by", overflow="fold")
        t.add_column("delivery")
    t.add_column("created", overflow="fold")  # a time cut short would read as another
    t.add_column("payload", overflow="fold")
    for n in items:
        extra = [str(n.status), n.dismissed_by or "", n.delivery or ""] if history else []
        created = time_text(n.created_at)
        payload = json.dumps(n.payload, sort_keys=True)
        if len(payload) > _PAYLOAD_CHARS:
            payload = payload[: _PAYLOAD_CHARS - 1] + "…"
        t.add_row(n.id, n.type, *extra, created, payload)
    print_table(t)


@app.command("add")
def add(
    account: AccountArg,
    type_: Annotated[str, typer.Argument(metavar="TYPE", help="Type, e.g. TierChanged.")],
    program: ProgramOption,
    payload: Annotated[
        str, typer.Option("--payload", help="JSON object (integers, never floats).")
    ] = "{}",
    key: Annotated[
        str | None, typer.Option("--key", help="Idempotency key: adding again is a no-op.")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="ISO time the active one disappears.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a notification; it supersedes the active one of the same type.

    Example: tallybook notifications add alice TierChanged --payload '{"tier": "gold"}' -p shop
    """
    try:
        body = json.loads(payload)
    except ValueError as exc:
        raise ValidationError(f"--payload is not valid JSON: {exc}") from None
    expires = iso_time(expires_at, "--expires-at")  # before the store is opened (or made)
    with open_ledger(store) as ledger:
        n = ledger.notifications.add(
            program, account, type_, body, idempotency_key=key, expires_at=expires
        )
    if as_json:
        print_json(n)
    else:
        console.print(f"{n.type} {n.id} {'(replay) ' if n.replay else ''}{n.status}")


@app.command("list")
def list_(
    account: AccountArg,
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the account's active notifications, newest first.

    Example: tallybook notifications list alice -p shop
    """
    with open_ledger(store, create=False) as ledger:
        found = ledger.notifications.list(program, account)
    if as_json:
        print_json({"notifications": found})
    else:
        _table(f"{program}/{account} active notifications", found)


@app.command("dismiss")
def dismiss(
    account: AccountArg,
    program: ProgramOption,
    notification_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Notification id to dismiss.")
    ] = None,
    type_: Annotated[
        str | None, typer.Option("--type", help="Dismiss the active one of this type instead.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Dismiss one notification by ID, or the active one of --type (idempotent).

    Examples:
      tallybook notifications dismiss alice n-1767225600000000-0a1b2c3d4e -p shop
      tallybook notifications dismiss alice --type LowBalance -p shop
    """
    if notification_id is not None and type_ is not None:
        raise ValidationError("give either a notification ID or --type, not both")
    if notification_id is None and type_ is None:
        raise ValidationError("give a notification ID or --type TYPE")
    with open_ledger(store) as ledger:
        if notification_id is not None:
            n: Notification | None = ledger.notifications.dismiss(program, account, notification_id)
        else:
            assert type_ is not None
            n = ledger.notifications.dismiss_type(program, account, type_)
    if as_json:
        print_json({"dismissed": n})
    elif n is None:
        console.print(f"no active {type_} notification")
    else:
        console.print(f"{n.type} {n.id} {n.status}")


@app.command("history")
def history(
    account: AccountArg,
    program: ProgramOption,
    since: Annotated[str | None, typer.Option("--since", help="ISO time, inclusive.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="ISO time, exclusive.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Page size, 1-1000.", parser=Number())] = 50,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Next page's cursor.")] = None,
    oldest_first: Annotated[bool, typer.Option("--oldest-first", help="Oldest first.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show notification history, newest first; items past retention are gone.

    Example: tallybook notifications history alice --since 2026-01-01 --limit 20 -p shop
    """
    with open_ledger(store, create=False) as ledger:
        page = ledger.notifications.history(
            program,
            account,
            since=iso_time(since, "--since"),
            until=iso_time(until, "--until"),
            newest_first=not oldest_first,
            limit=limit,
            cursor=cursor,
        )
    if as_json:
        print_json({"notifications": page.notifications, "cursor": page.cursor})
        return
    _table(f"{program}/{account} notification history", page.notifications, history=True)
    next_page(page.cursor)


@app.command("rules")
def rules(
    program: ProgramOption,
    set_file: Annotated[
        Path | None,
        typer.Option("--set", help="JSON file of rules to store (replaces the current ones)."),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Print the program's notification rules (JSON), or replace them with --set FILE.

    Example file: {"retention_days": 30, "types": {"TopUp": {"dismisses": ["LowBalance"]}}}
    """
    raw: Any = None
    if set_file is not None:  # read before the store is opened (or made)
        try:
            raw = json.loads(set_file.read_text(encoding="utf-8-sig"))  # a BOM is no rule
        except (OSError, ValueError) as exc:
            raise ValidationError(f"cannot read rules from {set_file}: {exc}") from None
    with open_ledger(store, create=set_file is not None) as ledger:
        if set_file is not None:
            result = ledger.notifications.set_rules(program, raw)
        else:
            result = ledger.notifications.rules(program)
    print_json(rules_to_settings(result))


@events_app.command("ingest")
def ingest(
    file: Annotated[Path, typer.Argument(help="NDJSON file: SNS envelopes or bare events.")],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
    show: Annotated[
        int, typer.Option("--show", help="Rejected lines to print.", parser=Number(min=0))
    ] = 20,
) -> None:
    """Ingest events from FILE.ndjson; a replayed MessageId is a no-op.

    Each line is an SNS-style envelope ({"Type": "Notification", "MessageId": ...,
    "Message": "{...}"}) or a bare event ({"id", "account", "type", "payload"}).
    A bad line is rejected with its reason and counted; it never stops the batch,
    and the exit code is then 2 (validation), as for billing ingest.

    Example: tallybook events ingest events.ndjson -p shop
    """
    try:
        size = file.stat().st_size
        handle = file.open("rb")  # a line that is not UTF-8 is rejected, not altered
    except OSError as exc:
        raise ValidationError(f"cannot read {file}: {exc}") from None
    with open_ledger(store) as ledger, handle:
        # an unknown program is one error (exit 4), not every line rejected
        ledger.programs.get(program)
        columns = (
            TextColumn("ingesting"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
        )
        with progress_bar(*columns, transient=as_json) as progress:
            task = progress.add_task("ingest", total=size)
            report = ledger.notifications.ingestor.ingest_lines(
                program, handle, progress=lambda n: progress.advance(task, n)
            )
    stats = report.stats.as_dict()
    if as_json:
        print_json({**stats, "rejected_lines": [list(r) for r in report.rejected]})
    else:
        for number, _, message in report.rejected[:show]:
            err_console.print(f"line {number}: {message}", markup=False, highlight=False)
        console.print(
            f"{stats['received']} messages: {stats['added']} added, "
            f"{stats['replayed']} replayed, {stats['confirmed']} confirmed, "
            f"{stats['pending_confirmation']} awaiting confirmation, "
            f"{stats['ignored']} ignored, {stats['rejected']} rejected"
        )
    if report.rejected:
        raise typer.Exit(ValidationError.exit_code)

"""``tallybook billing``: configure billing, ingest records from NDJSON, list records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

from tallybook.cli.ledger import JsonOption, ProgramOption
from tallybook.cli.options import Number, StoreOption, iso_time
from tallybook.cli.output import (
    console,
    err_console,
    next_page,
    open_ledger,
    print_json,
    progress_bar,
    table,
)
from tallybook.domain.json_text import RepeatedKey, loads_unique
from tallybook.errors import ValidationError

app = typer.Typer(
    help="Billing records of partners and agencies: configure, ingest (NDJSON), list.",
    no_args_is_help=True,
)


@app.command("configure")
def configure(
    program: ProgramOption,
    bucket_minutes: Annotated[
        int | None,
        typer.Option(
            help="Time bucket of records in minutes (fixed by the first record).",
            parser=Number(),
        ),
    ] = None,
    grace_minutes: Annotated[
        int | None,
        typer.Option(help="Wait after a window ends before reporting it.", parser=Number()),
    ] = None,
    start: Annotated[
        datetime | None,
        typer.Option(
            formats=["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"],
            help="Start of the first report window, UTC (fixed by the first record).",
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show or change the program's billing settings and report checkpoints.

    With no option it only shows them (nothing is stored). Bucket size and start
    may change until the first billing record or report run fixes them.

    Example: tallybook billing configure -p shop --bucket-minutes 15 --grace-minutes 10
    """
    from datetime import UTC

    with open_ledger(store) as ledger:
        state = ledger.billing.configure(
            program,
            bucket_minutes=bucket_minutes,
            grace_minutes=grace_minutes,
            start=start.replace(tzinfo=UTC) if start else None,
        )
        if as_json:
            print_json(state)
            return
        from tallybook.domain.billing import from_epoch

        table(
            f"billing of {program}",
            ["setting", "value"],
            [
                ["bucket", f"{state.config.bucket_seconds // 60} min"],
                ["grace", f"{state.config.grace_seconds // 60} min"],
                ["start", from_epoch(state.start)],
                *[
                    [f"reported until ({kind})", from_epoch(at)]
                    for kind, at in state.checkpoints.items()
                ],
            ],
        )


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    # bytes that are not UTF-8 make that line's error, not the whole run's
    # a leading byte order mark (Windows editors write one) is not part of line 1
    with path.open("r", encoding="utf-8-sig", errors="surrogateescape") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                line.encode("utf-8")
                row = loads_unique(line)
            except UnicodeEncodeError:
                row = ValidationError("not valid UTF-8")
            except json.JSONDecodeError as exc:
                row = ValidationError(f"not valid JSON ({exc.msg})")
            except RepeatedKey as exc:  # which one counts would be a guess, as over HTTP
                row = ValidationError(f"not valid JSON ({exc.key[:40]!r} is given more than once)")
            except ValueError:  # an integer past int()'s 4300 digits
                row = ValidationError("not valid JSON (a number is too large)")
            except RecursionError:
                row = ValidationError("not valid JSON (nested too deeply)")
            yield number, row


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


@app.command("ingest")
def ingest(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            readable=True,
            help="NDJSON: one record per line with id, partner, order_id, amount (minor "
            "units), currency, rate (decimal string) and time (ISO 8601).",
        ),
    ],
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ingest billing records exactly once each (re-running a file is safe).

    A bad line is reported with its number and reason and the rest goes on;
    the exit code is then 2 (validation).

    Example: tallybook billing ingest records.ndjson -p shop

    Example line: {"id": "r1", "partner": "acme", "order_id": "o1", "amount": 1999,
    "currency": "USD", "rate": "0.05", "time": "2026-01-01T12:00:00Z"}
    """
    total = _count_lines(file)
    with open_ledger(store) as ledger:
        columns = (
            TextColumn("ingest"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        with progress_bar(*columns, transient=as_json) as progress:
            task = progress.add_task("ingest", total=total)
            summary = ledger.billing.ingest_many(
                program, _lines(file), progress=lambda n: progress.advance(task, n)
            )
    result = {
        "created": summary.created,
        "replayed": summary.replayed,
        "late": summary.late,
        "errors": [{"line": n, "error": m} for n, m in summary.errors],
    }
    if as_json:
        print_json(result)
    else:
        console.print(
            f"{summary.created} created, {summary.replayed} already ingested, "
            f"{summary.late} filed late, {len(summary.errors)} rejected"
        )
        for number, message in summary.errors[:20]:
            err_console.print(f"line {number}: {message}")
    if summary.errors:
        raise typer.Exit(ValidationError.exit_code)


@app.command("list")
def list_records(
    program: ProgramOption,
    since: Annotated[
        str, typer.Option(help="From this time (its bucket), ISO 8601; UTC if no zone.")
    ],
    until: Annotated[
        str,
        typer.Option(
            help="Up to this time, ISO 8601 (UTC if no zone): the buckets that start before "
            "it, whole (a bucket holding it is listed to its end)."
        ),
    ],
    limit: Annotated[
        int, typer.Option(help="At most this many records (1-1000).", parser=Number())
    ] = 100,
    cursor: Annotated[
        str | None, typer.Option(help="Cursor from the previous page (printed after it).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List records filed in the buckets from SINCE to UNTIL (no scan: one query per bucket).

    One page of --limit records; the next one is --cursor CURSOR, as printed.

    Example:
      tallybook billing list -p shop --since 2026-01-01T00:00Z --until 2026-01-01T01:00Z
    """
    # a bare date or time is UTC, as for history and notifications (the API wants a zone)
    start, end = iso_time(since, "--since"), iso_time(until, "--until")
    with open_ledger(store, create=False) as ledger:
        page = ledger.billing.records(program, start, end, limit=limit, cursor=cursor)
    if as_json:
        print_json({"records": page.records, "cursor": page.cursor})
        return
    if not page.records:
        console.print("no billing records in that range")
        return
    table(
        f"billing records of {program}",
        ["id", "partner", "order", "time", "currency", "amount", "rate", "commission", "late"],
        [
            [
                r.id,
                r.partner,
                r.order_id,
                r.time,
                r.currency,
                r.amount,
                r.rate,
                r.commission,
                "yes" if r.late else "",
            ]
            for r in page.records
        ],
    )
    next_page(page.cursor)

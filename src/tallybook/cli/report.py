"""``tallybook report``: run incremental reports, rerun a past window, list reports."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer
from rich.progress import SpinnerColumn, TextColumn

from tallybook.cli.ledger import JsonOption, ProgramOption
from tallybook.cli.options import Number, StoreOption, report_interval_option
from tallybook.cli.output import (
    console,
    next_page,
    open_ledger,
    print_json,
    progress_bar,
    table,
)
from tallybook.domain.reports import ALL_KINDS
from tallybook.errors import NotFound
from tallybook.jobs import REPORT_INTERVAL_ENV, report_interval
from tallybook.ledger import Ledger
from tallybook.services.billing.reports import ReportResult
from tallybook.services.billing.sinks import S3_ENDPOINT_ENV, open_sink

app = typer.Typer(
    help="Billing and rewards-issued reports: incremental runs, reruns, listing.",
    no_args_is_help=True,
)


class KindChoice(StrEnum):
    billing = "billing"
    rewards = "rewards"
    all = "all"


DEFAULT_OUT = "reports"
OutOption = Annotated[
    str,
    typer.Option(
        "--out",
        envvar="TALLYBOOK_REPORTS_OUT",
        help="A folder, or s3://bucket/prefix ($TALLYBOOK_REPORTS_OUT; default ./reports). "
        f"An S3-compatible endpoint comes from ${S3_ENDPOINT_ENV}.",
    ),
]


def _print_results(results: list[ReportResult], as_json: bool) -> None:
    if as_json:
        print_json(results)
        return
    if not results:
        console.print("nothing due: every window older than the grace window is reported")
        return
    table(
        "reports written",
        ["kind", "window", "rows", "files", "note"],
        [
            [
                r.kind,
                r.window,
                r.rows,
                len(r.files),
                "repeated after interruption" if r.repeated else "",
            ]
            for r in results
        ],
    )


@app.command("run")
def run(
    program: ProgramOption,
    out: OutOption = DEFAULT_OUT,
    interval: Annotated[
        str | None,
        typer.Option(
            help="Window length: 15m, 1h, 1d (a multiple of the bucket); default "
            f"${REPORT_INTERVAL_ENV} as the scheduled job reads it, else 15m.",
            parser=report_interval_option,
            show_default=False,
        ),
    ] = None,
    kind: Annotated[KindChoice, typer.Option(help="Which report.")] = KindChoice.all,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Report every window since the checkpoint that is older than the grace window.

    Reads only the buckets of those windows, writes CSV and JSON per window to
    OUT/{program}/{kind}/{window}/, then advances the checkpoint stored in the
    table. Safe to run from cron at any rate; an interrupted run is repeated.

    Examples: tallybook report run -p shop --interval 1h --out ./reports
              tallybook report run -p shop --interval 1d --out s3://reports/tallybook
    """
    kinds = list(ALL_KINDS) if kind is KindChoice.all else [kind.value]
    interval = interval or report_interval(os.environ)
    sink = open_sink(out)
    with open_ledger(store) as ledger:
        columns = (
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("{task.completed} windows"),
        )
        with progress_bar(*columns) as progress:
            task = progress.add_task("report", total=None)

            def step(label: str) -> None:
                progress.update(task, advance=1, description=label)

            results = ledger.billing.reports.run(
                program,
                sink=sink,
                interval=interval,
                kinds=kinds,
                progress=step,
            )
    _print_results(results, as_json)


@app.command("rerun")
def rerun(
    program: ProgramOption,
    window: Annotated[
        str,
        typer.Option(help="The window, as named in the output: 20260101T000000Z_20260101T010000Z."),
    ],
    out: OutOption = DEFAULT_OUT,
    kind: Annotated[
        KindChoice,
        typer.Option(help="Which report; all (as report run): every kind reported for WINDOW."),
    ] = KindChoice.all,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a reported window again, from the table.

    The same bytes as the first run, unless an earlier version wrote it in
    another format (see --json's sha256 against report list --json; the
    stored sha256 is not changed).

    By default every report written for the window (billing and rewards, as
    report run writes them); --kind billing or rewards for one.

    Example: tallybook report rerun -p shop --window 20260101T000000Z_20260101T010000Z --out ./r
    """
    sink = open_sink(out)
    with open_ledger(store, create=False) as ledger:  # reads the store, writes files
        reports = ledger.billing.reports
        if kind is KindChoice.all:
            # the kinds a run reported for this window; none: the rerun says why
            kinds: list[str] = [k for k in ALL_KINDS if _reported(ledger, program, k, window)]
            kinds = kinds or [ALL_KINDS[0]]
        else:
            kinds = [kind.value]
        results = [reports.rerun(program, window, kind=k, sink=sink) for k in kinds]
    _print_results(results, as_json)


def _reported(ledger: Ledger, program: str, kind: str, window: str) -> bool:
    try:
        ledger.billing.reports.get(program, kind, window)
    except NotFound:
        return False
    return True


@app.command("list")
def list_reports(
    program: ProgramOption,
    kind: Annotated[KindChoice, typer.Option(help="Which report.")] = KindChoice.all,
    limit: Annotated[
        int, typer.Option(help="At most this many, newest first (1-1000).", parser=Number())
    ] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="Cursor from the previous page (printed after it).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List written reports, newest window first (per kind).

    When there are more, prints `next page: --cursor ...` (on stderr with
    --json, whose stdout is the page).

    Example: tallybook report list -p shop --kind billing
    """
    with open_ledger(store, create=False) as ledger:
        page = ledger.billing.reports.page(
            program,
            kind=None if kind is KindChoice.all else kind.value,
            limit=limit,
            cursor=cursor,
        )
    if as_json:
        print_json(page.reports)
        next_page(page.cursor, stderr=True)
        return
    table(
        f"reports of {program}",
        ["kind", "window", "rows", "location", "written at"],
        [[i.kind, i.window, i.rows, i.location, i.written_at] for i in page.reports],
    )
    next_page(page.cursor)

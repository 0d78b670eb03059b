"""``tallybook torture``: the reliability workload and checker (see docs/reliability.md)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from tallybook.cli.options import Number, StoreOption
from tallybook.cli.output import err_console, progress_bar, to_jsonable
from tallybook.errors import ValidationError
from tallybook.extras import install_hint, missing
from tallybook.reliability.faults import FaultPlan
from tallybook.reliability.runner import TortureConfig, run
from tallybook.store.url import parse_store_url, resolve_store_url

#: bounds of the workload's size: past them a run fails while starting (an
#: OverflowError or MemoryError at 10**20 threads, a process storm at 10**11)
MAX_OPS = 100_000_000
MAX_THREADS = 256
MAX_PROCESSES = 64
MAX_KILLS = 1_000


def torture(
    store: StoreOption = None,
    ops: Annotated[
        int, typer.Option("--ops", help="Operations in total.", parser=Number(min=1, max=MAX_OPS))
    ] = 2_000,
    threads: Annotated[
        int,
        typer.Option(
            "--threads",
            help="Python API client threads (per process).",
            parser=Number(min=0, max=MAX_THREADS),
        ),
    ] = 4,
    http_threads: Annotated[
        int,
        typer.Option(
            "--http-threads", help="HTTP client threads.", parser=Number(min=0, max=MAX_THREADS)
        ),
    ] = 2,
    processes: Annotated[
        int,
        typer.Option(
            "--processes",
            help="Extra worker processes of --threads clients.",
            parser=Number(min=0, max=MAX_PROCESSES),
        ),
    ] = 0,
    readers: Annotated[
        int,
        typer.Option(
            "--readers",
            help="Concurrent reader threads checking totals.",
            parser=Number(min=0, max=MAX_THREADS),
        ),
    ] = 1,
    kills: Annotated[
        int,
        typer.Option(
            "--kills",
            help="SQLite: serve HTTP from a `tallybook serve` process and SIGKILL it this "
            "many times mid-run (it is restarted; clients retry their keys).",
            parser=Number(min=0, max=MAX_KILLS),
        ),
    ] = 0,
    accounts: Annotated[
        int, typer.Option("--accounts", help="Accounts.", parser=Number(min=2, max=500))
    ] = 12,
    replay_rate: Annotated[
        float,
        typer.Option(
            "--replay-rate",
            help="Share of operations that replay a done key.",
            parser=Number(min=0, max=1, decimal=True),
        ),
    ] = 0.1,
    faults: Annotated[
        str, typer.Option("--faults", help="Fault plan at the storage port: standard or none.")
    ] = "standard",
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of every random choice.", parser=Number())
    ] = 1,
    program: Annotated[
        str | None,
        typer.Option("--program", help="Program to create and use (default: torture-<time>)."),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Append the result (Markdown) to this file."),
    ] = None,
    max_seconds: Annotated[
        float,
        typer.Option(
            "--max-seconds",
            help="Stop the clients after this long (0: run all --ops).",
            parser=Number(min=0, decimal=True),
        ),
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a random workload with replays and storage faults, then check invariants 1-6.

    Earn, redeem, transfer, credit, hold, capture, void and notify operations from
    many clients. Exits 1 when a violation was found.

    Example: tallybook torture --ops 100000 --processes 2 --store sqlite:///./torture.db
    """
    url = resolve_store_url(store)
    if kills and parse_store_url(url).engine != "sqlite":
        raise ValidationError("--kills needs a SQLite store (the server restarts on its file)")
    if processes and parse_store_url(url).engine == "memory":
        raise ValidationError(
            "--processes needs a SQLite or DynamoDB store: memory:// lives in one process"
        )
    if kills and not http_threads:
        raise ValidationError("--kills needs --http-threads above 0")
    if faults not in ("standard", "none"):
        raise ValidationError("--faults is standard or none")
    if threads * (1 + processes) + http_threads == 0:
        raise ValidationError("no clients: give --threads or --http-threads")
    if http_threads and missing("server"):  # its HTTP clients call an in-process server
        err_console.print(
            f"{install_hint('server')} (or --http-threads 0: Python API clients only)",
            style="red",
            markup=False,
        )
        raise typer.Exit(1)
    if report is not None:  # before the run, not after it, when its result would be lost
        try:
            with report.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ValidationError(f"cannot append to --report {report}: {exc.strerror}") from None
    plan = FaultPlan.standard() if faults == "standard" else FaultPlan.none()
    config = TortureConfig(
        store_url=url,
        program=program or f"torture-{datetime.now(UTC):%Y%m%d%H%M%S}",
        ops=ops,
        threads=threads,
        http_threads=http_threads,
        processes=processes,
        readers=readers,
        kills=kills,
        accounts=accounts,
        replay_rate=replay_rate,
        seed=seed,
        faults=plan,
        max_seconds=max_seconds,
    )
    # injected faults make the services log warnings by design; keep the console readable
    logging.getLogger("tallybook").setLevel(logging.CRITICAL)
    with progress_bar(
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=as_json,
    ) as bar:
        task = bar.add_task("torture", total=ops)
        result = run(config, tick=lambda n: bar.advance(task, n))
    text = result.markdown()
    if report is not None:
        with report.open("a", encoding="utf-8") as f:
            f.write("\n" + text)
    if as_json:
        print(json.dumps(to_jsonable(result), indent=2, sort_keys=True))
    else:
        print(text)
    if not result.ok:
        raise typer.Exit(1)

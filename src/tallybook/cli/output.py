"""Printing helpers shared by CLI commands: JSON for machines, tables for people."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from typing import Any

from rich.console import Console, JustifyMethod
from rich.measure import Measurement
from rich.progress import Progress, ProgressColumn
from rich.table import Table

from tallybook.errors import NotFound
from tallybook.ledger import Ledger
from tallybook.store.records.codec import iso
from tallybook.store.url import open_store, parse_store_url, resolve_store_url

#: soft wrap: a line of output is one line however narrow the terminal or pipe
#: (rich would break it at 80 columns when stdout is not a terminal); tables still fit.
#: No markup: what is printed holds stored text (a payload, a URL, a key's name) in
#: which "[/x]" would stop the command and "[b]x[/b]" print as "x"; a line that
#: colours a word passes ``markup=True`` with the rest escaped.
console = Console(soft_wrap=True, markup=False)
err_console = Console(stderr=True, soft_wrap=True, markup=False)


def progress_bar(
    *columns: str | ProgressColumn, transient: bool = True, disable: bool = False
) -> Progress:
    """A progress display on stderr, shown on a terminal only: on a pipe or a file
    rich ends it with an empty line, which stood before the result or the error line."""
    return Progress(
        *columns,
        console=err_console,
        transient=transient,
        disable=disable or not err_console.is_interactive,
    )


def time_text(t: datetime) -> str:
    """A time as the HTTP API and ``--json`` print it: ``2026-01-31T12:00:00.000000Z``
    (UTC, always six fraction digits, so times sort as text)."""
    return iso(t)


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return time_text(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    print(json.dumps(to_jsonable(value), indent=2, sort_keys=True))


def next_page(cursor: str | None, *, stderr: bool = False) -> None:
    """After a page with more to come: ``next page: --cursor CURSOR``, the option
    that reads the next one (on stderr beside ``--json``, whose stdout is the page)."""
    if cursor:
        out = err_console if stderr else console
        out.print(f"next page: --cursor {cursor}", markup=False, highlight=False)


#: columns holding what another command takes (``webhooks deliveries ID``,
#: ``report rerun --window W``, ``wallet transaction ID``, ``wallet hold ID``...):
#: printed whole, never cut with an ellipsis, however narrow the terminal
KEY_COLUMNS = frozenset({"id", "window", "hold", "grant", "txn_id", "account", "position"})
#: the widest a key column is kept whole (ids are at most 128 characters)
KEY_WIDTH = 128


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    cells = [[_cell(v) for v in r] for r in rows]
    t = Table(title=title)
    for i, c in enumerate(columns):
        justify: JustifyMethod = (
            "right" if c in {"amount", "balance", "held", "available", "seq"} else "left"
        )
        if c in KEY_COLUMNS:
            widest = max((len(r[i]) for r in cells), default=0)
            t.add_column(c, justify=justify, no_wrap=True, min_width=min(widest, KEY_WIDTH))
        elif any(isinstance(r[i], datetime) for r in rows):  # a time folds, never cut short
            t.add_column(c, justify=justify, overflow="fold")
        else:
            t.add_column(c, justify=justify)
    for r in cells:
        t.add_row(*r)
    print_table(t)


#: wider than any table: the width a table is measured in for a pipe or a file
_UNBOUNDED = 100_000


def print_table(t: Table) -> None:
    """A table fitted to the terminal; on a pipe or a file (a script reading it) at
    its natural width: each row one line, no time or id folded over lines, no
    number cut short, whatever ``$COLUMNS`` says (rich would fit it to 80
    columns). ``--json`` is the form meant for scripts."""
    if console.is_terminal:
        console.print(t)
        return
    natural = Measurement.get(console, console.options.update_width(_UNBOUNDED), t).maximum
    width = console.width
    console.width = natural
    try:
        console.print(t)
    finally:
        console.width = width


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return time_text(value) if isinstance(value, datetime) else str(value)


@contextmanager
def open_ledger(store: str | None, *, create: bool = True, new: bool = False) -> Iterator[Ledger]:
    """The ledger of a store URL, closed when the command ends. A command that only
    reads passes ``create=False``: a SQLite file that does not exist, or holds no
    store, is refused, where opening it would make one (a mistyped path read as an
    empty ledger). Only a command that may start a store (``new=True``: ``program
    create``) makes the file; any other write works in a program, which a store
    not made yet cannot hold: it is refused as not found and nothing is made
    (was: an empty file left behind by a refused command)."""
    if not create:
        with Ledger(open_store(store, create=False)) as ledger:
            yield ledger
        return
    if not new:
        _refuse_a_new_sqlite_file(store)
    with Ledger.open(store) as ledger:
        yield ledger


def _refuse_a_new_sqlite_file(store: str | None) -> None:
    parsed = parse_store_url(resolve_store_url(store))
    if parsed.engine == "sqlite" and not os.path.lexists(parsed.path):
        raise NotFound(
            f"SQLite file {parsed.path} does not exist, so it holds no program: check "
            "the store URL (--store or $TALLYBOOK_STORE), or start a store with "
            "`tallybook program create`"
        )

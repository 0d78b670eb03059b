"""Options shared by every command."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, overload

import typer

from tallybook.errors import ValidationError

#: for a command with a numeric argument: a negative one (``-5``) is read as
#: that argument, and refused by its own check, not as an unknown option
NUMERIC_ARGS = {"ignore_unknown_options": True}

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TALLYBOOK_STORE",
        help="Store URL: sqlite:///PATH.db, dynamodb://TABLE?region=..&endpoint=.. or "
        "memory://NAME (lost when the command exits); default sqlite:///./tallybook.db. "
        "A command that only reads refuses a SQLite file that does not exist.",
        show_default=False,
    ),
]

TxnOption = Annotated[
    str | None,
    typer.Option(
        "--txn",
        help="Transaction id (idempotency key): a replay returns the first result (required).",
        show_default=False,
    ),
]
#: the name the wallet and loyalty commands used before: still accepted, not shown
TxnIdAlias = Annotated[str | None, typer.Option("--txn-id", hidden=True)]


class MissingOption(typer.BadParameter):
    """A required option checked by the command itself: a usage error (exit 2) that
    reads like click's own, not "Invalid value for '--txn': Missing option '--txn'"."""

    def format_message(self) -> str:
        return self.message


def txn_of(txn: str | None, alias: str | None) -> str:
    """The transaction id given as ``--txn`` (or its old name ``--txn-id``)."""
    if txn is not None and alias is not None and txn != alias:
        raise typer.BadParameter("give the transaction id once", param_hint="'--txn'")
    value = txn if txn is not None else alias
    if value is None:
        raise MissingOption("Missing option '--txn'.")
    return value


@overload
def iso_time(value: str, name: str) -> datetime: ...
@overload
def iso_time(value: str | None, name: str) -> datetime | None: ...
def iso_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 time as printed by ``--json`` (``2026-01-01T00:00:00Z``, an offset,
    or a bare date); without a zone it is UTC."""
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(f"{name} must be an ISO 8601 time, got {value!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)

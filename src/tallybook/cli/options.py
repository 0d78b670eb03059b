"""Options shared by every command."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from difflib import get_close_matches
from typing import Annotated, Any, overload

import typer
from typer.core import TyperCommand

from tallybook.domain.billing import parse_interval
from tallybook.errors import ValidationError

#: for a command with a numeric argument: a negative one (``-5``) is read as
#: that argument, and refused by its own check, not as an unknown option
#: (with ``cls=NumericArgsCommand``, which still refuses a mistyped option)
NUMERIC_ARGS = {"ignore_unknown_options": True}

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TALLYBOOK_STORE",
        help="Store URL: sqlite:///PATH.db, dynamodb://TABLE?region=..&endpoint=.. or "
        "memory://NAME (lost when the command exits); default sqlite:///./tallybook.db. "
        "Only program create, serve, table create and torture make a SQLite file "
        "that does not exist; a command that only reads also refuses one that holds "
        "no tallybook store.",
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


class UsageProblem(typer.BadParameter):
    """A usage error the command finds itself (a missing ``--txn``, an unknown option
    among negative numbers): exit 2, worded like click's own, not "Invalid value
    for '--txn': Missing option '--txn'"."""

    def format_message(self) -> str:
        return self.message


#: a negative number or decimal (``-5``, ``-0.5``): an argument, not an option
_NEGATIVE = re.compile(r"-[0-9.]")


class NumericArgsCommand(TyperCommand):
    """A command of :data:`NUMERIC_ARGS`: click lets its unknown options through as
    arguments (so that ``-5`` is one), which read a mistyped option (``--desc x``)
    as "unexpected extra arguments" or as the amount itself. Such an option is
    refused here as click refuses it elsewhere: "No such option: --desc"."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        options: list[Any] = [p for p in self.get_params(ctx) if p.param_type_name == "option"]
        names = {n for p in options for n in (*p.opts, *p.secondary_opts)}
        valued = {n for p in options if not (p.is_flag or p.count) for n in p.opts}
        rest = iter(args)
        for arg in rest:
            name = arg.split("=", 1)[0]
            if arg == "--":
                break
            if name in valued and "=" not in arg:
                next(rest, None)  # its value, whatever it looks like
            elif (
                arg.startswith("-")
                and arg != "-"
                and not _NEGATIVE.match(arg)
                and name not in names
                and arg[:2] not in names  # -pshop: a short option and its value
            ):
                close = get_close_matches(name, sorted(names))
                hint = f" (Possible options: {', '.join(close)})" if close else ""
                raise UsageProblem(f"No such option: {name}{hint}", ctx=ctx)
        return super().parse_args(ctx, args)


def txn_of(txn: str | None, alias: str | None) -> str:
    """The transaction id given as ``--txn`` (or its old name ``--txn-id``)."""
    if txn is not None and alias is not None and txn != alias:
        raise typer.BadParameter("give the transaction id once", param_hint="'--txn'")
    value = txn if txn is not None else alias
    if value is None:
        raise UsageProblem("Missing option '--txn'.")
    return value


#: a number as typed: ASCII digits (``int()`` and ``float()`` take fullwidth or
#: Arabic-Indic digits, ``5_000``, `` 5`` and ``+5`` too; a number here is never one)
_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def parse_integer(text: str) -> int:
    """An integer typed in ASCII digits, with a leading ``-`` (refused by the
    command's own check where it takes no negative number); ValueError else."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(f"{shown(text)!r} is not an integer (ASCII digits only)")
    if len(text) > _MAX_DIGITS:  # past any bound; int() refuses 4300 digits
        raise ValueError(f"{text[:12]}... ({len(text)} digits) is too large")
    return int(text)


#: more digits than any number a command takes could have
_MAX_DIGITS = 100


def shown(text: str) -> str:
    """``text`` as an error line quotes it: at most 40 characters."""
    return text if len(text) <= 40 else text[:37] + "..."


class Number:
    """The parser of every numeric option and argument (``parser=Number(...)``):
    :func:`parse_integer`, or with ``decimal=True`` ASCII digits with one ``.``;
    outside ``min``-``max`` it is refused as click refuses a range ("-1 is not in
    the range x>=0"). Each is one ``error:`` line, exit 2."""

    def __init__(
        self, *, min: float | None = None, max: float | None = None, decimal: bool = False
    ) -> None:
        self.min, self.max, self.decimal = min, max, decimal
        kind = "decimal" if decimal else "integer"
        bounds = self._bounds()
        self.__name__ = f"{kind} {bounds}" if bounds else kind  # the help's metavar

    def _bounds(self) -> str:
        if self.min is None and self.max is None:
            return ""
        if self.max is None:
            return f"x>={self.min}"
        if self.min is None:
            return f"x<={self.max}"
        return f"{self.min}<=x<={self.max}"

    def __call__(self, value: str | float) -> Any:
        if isinstance(value, int | float):  # the default, already a number
            return value
        if not self.decimal:
            try:
                number: float = parse_integer(value)
            except ValueError as exc:
                raise typer.BadParameter(str(exc)) from None
        elif _DECIMAL.fullmatch(value):
            number = float(value)
        else:
            raise typer.BadParameter(f"{value!r} is not a number (ASCII digits and a '.' only)")
        if (self.min is not None and number < self.min) or (
            self.max is not None and number > self.max
        ):
            raise typer.BadParameter(f"{value} is not in the range {self._bounds()}")
        return number


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


def report_interval_option(value: str) -> str:
    """``--interval`` of a report run as typed (``15m``, ``1h``, ``1d``), checked
    before anything opens: nothing around it, as a number (one ``error:`` line
    naming the option, exit 2)."""
    try:
        parse_interval(value)
    except ValidationError as exc:
        raise typer.BadParameter(exc.message) from None
    return value


report_interval_option.__name__ = "interval"  # the help's metavar: <interval>

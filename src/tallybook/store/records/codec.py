"""Mapping between stored items and domain values (kept out of the domain)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from tallybook.domain.model import (
    Account,
    Entry,
    FundSpec,
    FundState,
    PostedLeg,
    Program,
    Transaction,
)
from tallybook.errors import DamagedItem
from tallybook.store.port import Item, Value


def iso(t: datetime) -> str:
    """``2026-01-31T12:00:00.000000Z``: UTC, always six fraction digits.

    A time already in UTC (every clock's, every parsed one) is formatted as it
    is: its isoformat ends in ``+00:00``, which ``Z`` replaces, without the
    conversion and copy the general case makes (a posting formats several)."""
    if t.tzinfo is UTC and t.year >= 1000:
        return f"{t.isoformat(timespec='microseconds')[:26]}Z"
    u = t.astimezone(UTC)  # isoformat pads a year before 1000 to four digits; strftime does not
    return f"{u.replace(tzinfo=None).isoformat(timespec='microseconds')}Z"


def parse_iso(s: str) -> datetime:
    # fromisoformat is several times faster than strptime; the stored format
    # (``iso``) takes the fast path, anything else the exact strptime rules.
    # It reads the ``Z`` as UTC itself (Python 3.11+), so the result needs no copy.
    if (
        len(s) == 27
        and s[4] == s[7] == "-"
        and s[10] == "T"
        and s[13] == s[16] == ":"
        and s[19] == "."
        and s[26] == "Z"
        and s[20:26].isdigit()
    ):
        try:
            return datetime.fromisoformat(s)
        except ValueError:
            pass
    dash = s.find("-")
    if 0 < dash < 4:  # a year before 1000, as ``iso`` writes it (strptime wants 4 digits)
        s = "0" * (4 - dash) + s
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)


def to_us(t: datetime) -> int:
    """Microseconds since the epoch, exactly (no float rounding)."""
    return (t - EPOCH) // ONE_US


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def _str(item: Item, name: str) -> str:
    return cast(str, item[name])


def _opt_str(item: Item, name: str) -> str | None:
    v = item.get(name)
    return v if isinstance(v, str) else None


def _int(item: Item | dict[str, Any], name: str, default: int = 0) -> int:
    v = item.get(name, default)
    return v if isinstance(v, int) else default


#: The storage layout this version writes. 1: lots as items of their own and
#: the tier index on account heads (tallybook 0.1); 2: lots on their earns'
#: entries and tier membership rows (docs/table-design.md, "Layout versions").
LAYOUT = 2


def program_to_item(p: Program) -> dict[str, Value]:
    return {
        "layout": p.layout,
        "id": p.id,
        "name": p.name,
        "currency": p.currency,
        "funds": [
            {
                "name": f.name,
                "unit": f.unit,
                "allow_overdraft": f.allow_overdraft,
                "low_balance_threshold": f.low_balance_threshold,
            }
            for f in p.funds
        ],
        "created_at": iso(p.created_at),
        "settings": cast(Value, p.settings),
    }


def program_from_item(item: Item) -> Program:
    funds = tuple(
        FundSpec(
            name=cast(str, f["name"]),
            unit=cast(str, f["unit"]),
            allow_overdraft=bool(f.get("allow_overdraft")),
            low_balance_threshold=cast(int | None, f.get("low_balance_threshold")),
        )
        for f in cast(list[dict[str, Value]], item["funds"])
    )
    return Program(
        id=_str(item, "id"),
        name=_str(item, "name"),
        currency=_str(item, "currency"),
        funds=funds,
        created_at=parse_iso(_str(item, "created_at")),
        settings=cast(dict[str, Any], item.get("settings") or {}),
        layout=_int(item, "layout", 1),
    )


def program_problem(item: Item) -> str | None:
    """What keeps a program item from being read as :func:`program_from_item` reads
    it (or its funds from making sense: each named once, a threshold of at least
    zero); None if it reads."""
    found = malformed(item, text=("id", "name", "currency"), times=("created_at",))
    if found is not None:
        return found
    for name, kind, ok in (("settings", "a map", dict), ("layout", "an integer", int)):
        value = item.get(name)
        if value is not None and (not isinstance(value, ok) or isinstance(value, bool)):
            return f"{name} {value!r} is not {kind}"
    funds = item.get("funds")
    if not isinstance(funds, list):
        return "no funds" if funds is None else f"funds {funds!r} are not a list"
    names: set[str] = set()
    for n, fund in enumerate(funds, 1):
        found = _fund_problem(fund)
        if found is None:
            name = cast(dict[str, str], fund)["name"]
            found = f"fund {name} is listed twice" if name in names else None
            names.add(name)
        if found is not None:
            return f"fund {n}: {found}"
    return None


def _fund_problem(fund: Value) -> str | None:
    if not isinstance(fund, dict):
        return f"{fund!r} is not a map"
    found = malformed(fund, text=("name", "unit"))
    if found is not None:
        return found
    overdraft = fund.get("allow_overdraft")
    if overdraft is not None and not isinstance(overdraft, bool):
        return f"allow_overdraft {overdraft!r} is not true or false"
    threshold = fund.get("low_balance_threshold")
    if threshold is not None and (
        not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0
    ):
        return f"low_balance_threshold {threshold!r} is not an integer of at least 0"
    return None


def fund_state_to_value(s: FundState) -> dict[str, Value]:
    return {"balance": s.balance, "held": s.held, "seq": s.seq, "last_us": s.last_us}


#: a fund never posted to, as a head stores it, and its value: a head carries
#: every fund of its program, most of them usually untouched, and reading one
#: is the commonest decoding of all (every posting reads its heads), so they
#: share one frozen value instead of each building its own
_UNTOUCHED_VALUE: dict[str, Value] = {"balance": 0, "held": 0, "seq": 0, "last_us": 0}
_UNTOUCHED = FundState()


def fund_state_from_value(v: Value) -> FundState:
    if v == _UNTOUCHED_VALUE:
        return _UNTOUCHED
    d = cast(dict[str, Any], v)
    balance, held, seq, last_us = d.get("balance"), d.get("held"), d.get("seq"), d.get("last_us")
    if type(balance) is int and type(held) is int and type(seq) is int and type(last_us) is int:
        return FundState(balance, held, seq, last_us)  # as stored: no field to default
    return FundState(_int(d, "balance"), _int(d, "held"), _int(d, "seq"), _int(d, "last_us"))


def account_from_item(item: Item) -> Account:
    """The account a head item holds; :class:`DamagedItem` naming the head and what
    is wrong with it when it does not read (the failure is caught, not looked
    for first: every posting decodes its heads)."""
    try:
        return _account(item)
    except _UNREADABLE as exc:
        raise _damaged(
            f"account {item.get('account')} of program {item.get('program')}: its stored head",
            item,
            head_problem(item),
            exc,
        ) from exc


#: what decoding an item with an attribute missing or of another type raises
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError)


def _damaged(what: str, item: Item, problem: str | None, exc: Exception) -> DamagedItem:
    """:class:`DamagedItem` for ``item`` (``what`` it is), naming its key and what is
    wrong with it (``problem``, else the decoding error)."""
    found = problem or f"{type(exc).__name__}: {exc}"
    return DamagedItem(f"{what} {item.get('pk')} / {item.get('sk')} is damaged: {found}")


def _account(item: Item) -> Account:
    funds = cast(dict[str, Value], item.get("funds") or {})
    return Account(
        program=_str(item, "program"),
        id=_str(item, "account"),
        created_at=parse_iso(_str(item, "created_at")),
        version=_int(item, "version"),
        funds={name: fund_state_from_value(v) for name, v in funds.items()},
        attributes=cast(dict[str, Any], item.get("attrs") or {}),
        client_attributes=cast(dict[str, str], item.get("client_attrs") or {}),
        system=_system_counters(item),
        **_last_change(item.get("chg")),
    )


def _last_change(value: Value) -> dict[str, Any]:
    """A head's ``chg``: ``[number, its first event id, its µs]`` of the account's
    last numbered change (see records/ledger.py ``Changes``)."""
    if not isinstance(value, list) or len(value) != 3:
        return {}
    n, event, us = value
    if not (isinstance(n, int) and isinstance(event, str) and isinstance(us, int)):
        return {}
    return {"changes": n, "last_change": event, "last_change_us": us}


def _system_counters(item: Item) -> dict[tuple[str, str], int]:
    """``sys:{account}:{fund}`` attributes of a head (see records/ledger.py)."""
    out: dict[tuple[str, str], int] = {}
    for name, value in item.items():
        if name.startswith("sys:") and isinstance(value, int):
            account, _, fund = name[4:].rpartition(":")
            out[(account, fund)] = value
    return out


def malformed(
    item: Mapping[str, Any],
    *,
    text: Sequence[str] = (),
    ints: Sequence[str] = (),
    times: Sequence[str] = (),
) -> str | None:
    """What keeps ``item`` from being read (for the check): the first of ``text``,
    ``ints`` or ``times`` attributes missing or of another type; None if none."""
    for name in (*text, *times):
        if name not in item:
            return f"no {name}"
        if not isinstance(item[name], str):
            return f"{name} is not text"
    for name in ints:
        value = item.get(name)
        if value is None:
            return f"no {name}"
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{name} {value!r} is not an integer"
    for name in times:
        try:
            parse_iso(cast(str, item[name]))
        except ValueError:
            return f"{name} {item[name]!r} is not a time"
    return None


def head_problem(item: Item) -> str | None:
    """What keeps an account head from being read (or its funds from making sense:
    nothing withheld below zero); None if it reads."""
    found = malformed(item, text=("program", "account"), ints=("version",), times=("created_at",))
    if found is not None:
        return found
    funds = item.get("funds")
    if not isinstance(funds, dict):
        return "no funds" if funds is None else f"funds {funds!r} are not a map"
    for name, state in funds.items():
        if not isinstance(state, dict):
            return f"fund {name} {state!r} is not a map"
        for field in ("balance", "held", "seq", "last_us"):
            value = state.get(field)
            if not isinstance(value, int) or isinstance(value, bool):
                return f"fund {name}: {field} {value!r} is not an integer"
            if field != "balance" and value < 0:
                return f"fund {name}: {field} {value} is below zero"
    for name in ("attrs", "client_attrs"):
        if name in item and not isinstance(item[name], dict):
            return f"{name} {item[name]!r} are not a map"
    for name, value in item.items():
        if name.startswith("sys:") and (not isinstance(value, int) or isinstance(value, bool)):
            return f"{name} {value!r} is not an integer"
    if "chg" in item and not _last_change(item["chg"]):
        return f"chg {item['chg']!r} is not a change number"
    return None


def entry_problem(item: Item) -> str | None:
    """What keeps an entry item from being read; None if it reads."""
    return malformed(
        item,
        text=("program", "account", "fund", "unit", "txn_id", "type"),
        ints=("seq", "amount", "balance"),
        times=("created_at",),
    )


def entry_from_item(item: Item) -> Entry:
    """The entry an item holds; :class:`DamagedItem` naming it when it does not read."""
    try:
        return _entry(item)
    except _UNREADABLE as exc:
        raise _damaged("history entry", item, entry_problem(item), exc) from exc


def _entry(item: Item) -> Entry:
    return Entry(
        program=_str(item, "program"),
        account=_str(item, "account"),
        fund=_str(item, "fund"),
        unit=_str(item, "unit"),
        seq=_int(item, "seq"),
        amount=_int(item, "amount"),
        balance=_int(item, "balance"),
        txn_id=_str(item, "txn_id"),
        type=_str(item, "type"),
        created_at=parse_iso(_str(item, "created_at")),
        order_id=_opt_str(item, "order_id"),
        description=_opt_str(item, "description"),
        metadata=cast(dict[str, str], item.get("metadata") or {}),
    )


def leg_to_value(leg: PostedLeg) -> dict[str, Value]:
    v: dict[str, Value] = {
        "account": leg.account,
        "fund": leg.fund,
        "unit": leg.unit,
        "amount": leg.amount,
    }
    if leg.balance is not None:
        v["balance"] = leg.balance
        v["seq"] = leg.seq
    return v


def leg_from_value(v: Value) -> PostedLeg:
    d = cast(dict[str, Any], v)
    return PostedLeg(
        account=d["account"],
        fund=d["fund"],
        unit=d["unit"],
        amount=d["amount"],
        balance=d.get("balance"),
        seq=d.get("seq"),
    )


def transaction_problem(item: Item) -> str | None:
    """What keeps a transaction record from being read (its legs included); None
    if it reads."""
    found = malformed(item, text=("program", "txn_id", "type"), times=("created_at",))
    if found is not None:
        return found
    legs = item.get("legs")
    if not isinstance(legs, list):
        return "no legs" if legs is None else f"legs {legs!r} are not a list"
    for n, leg in enumerate(legs, 1):
        if not isinstance(leg, dict):
            return f"leg {n} {leg!r} is not a map"
        found = malformed(leg, text=("account", "fund", "unit"), ints=("amount",))
        if found is None:
            found = next(
                (
                    f"{name} {leg[name]!r} is not an integer"
                    for name in ("balance", "seq")
                    if leg.get(name) is not None
                    and (not isinstance(leg[name], int) or isinstance(leg[name], bool))
                ),
                None,
            )
        if found is not None:
            return f"leg {n}: {found}"
    return None


def transaction_from_item(item: Item, *, replay: bool = False) -> Transaction:
    """The transaction a record holds; :class:`DamagedItem` naming the record when it
    does not read."""
    try:
        return _transaction(item, replay)
    except _UNREADABLE as exc:
        raise _damaged("transaction record", item, transaction_problem(item), exc) from exc


def _transaction(item: Item, replay: bool) -> Transaction:
    return Transaction(
        program=_str(item, "program"),
        id=_str(item, "txn_id"),
        type=_str(item, "type"),
        legs=tuple(leg_from_value(v) for v in cast(list[Value], item.get("legs") or [])),
        created_at=parse_iso(_str(item, "created_at")),
        order_id=_opt_str(item, "order_id"),
        description=_opt_str(item, "description"),
        metadata=cast(dict[str, str], item.get("metadata") or {}),
        details=cast(dict[str, Any], item.get("details") or {}),
        replay=replay,
    )

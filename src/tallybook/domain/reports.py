"""Report content: per-partner totals and line items, rendered deterministically.

The same inputs always give the same bytes: rows are sorted, JSON keys are
sorted with a fixed indent, CSV uses ``\\n`` line ends, and nothing depends on
the time a report is generated. That is what makes ``report rerun`` byte for
byte identical to the original run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tallybook.domain.billing import BillingRecord, from_epoch, iso, window_name
from tallybook.domain.model import EXPIRY, ISSUANCE, REDEMPTION
from tallybook.errors import ValidationError


class ReportKind(StrEnum):
    BILLING = "billing"
    REWARDS = "rewards"


ALL_KINDS = (ReportKind.BILLING, ReportKind.REWARDS)

#: the files each kind of report writes into its window's folder
FILES: dict[ReportKind, tuple[str, ...]] = {
    ReportKind.BILLING: ("billing_totals.csv", "billing_line_items.csv", "billing.json"),
    ReportKind.REWARDS: ("rewards_issued.csv", "rewards_issued.json"),
}

#: system accounts whose postings the rewards-issued report counts
REWARD_COUNTERS = (ISSUANCE, REDEMPTION, EXPIRY)


def check_kind(value: object) -> ReportKind:
    try:
        return ReportKind(str(value))
    except ValueError as exc:
        raise ValidationError(
            f"report kind {str(value)[:20]!r} must be one of: {', '.join(ALL_KINDS)}"
        ) from exc


def kind_of_file(name: str) -> ReportKind:
    for kind, names in FILES.items():
        if name in names:
            return kind
    raise ValidationError(
        f"unknown report file {name[:60]!r}; files: "
        + ", ".join(n for names in FILES.values() for n in names)
    )


def report_path(program: str, kind: ReportKind, start: int, end: int, name: str) -> str:
    """``{program}/{kind}/{window}/{file}``: the same path in a folder or under an S3 prefix."""
    return f"{program}/{kind}/{window_name(start, end)}/{name}"


@dataclass(frozen=True, slots=True)
class PartnerTotal:
    partner: str
    currency: str
    records: int
    amount: int
    commission: int


@dataclass(frozen=True, slots=True)
class RewardFlow:
    """One customer entry posted against issuance, redemption or expiry accounts:
    its amount per such account (one, but for a wallet capture that also sends
    released bonus of an expired grant to expiry)."""

    partner: str
    fund: str
    unit: str
    shares: Mapping[str, int]
    txn_id: str
    account: str


@dataclass(frozen=True, slots=True)
class RewardTotal:
    partner: str
    fund: str
    unit: str
    issued: int
    redeemed: int
    expired: int
    entries: int


def sort_records(records: Iterable[BillingRecord]) -> list[BillingRecord]:
    return sorted(records, key=lambda r: (r.partner, r.time, r.id))


def partner_totals(records: Iterable[BillingRecord]) -> list[PartnerTotal]:
    """Per (partner, currency): record count, amount and commission sums."""
    acc: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in records:
        row = acc[(r.partner, r.currency)]
        row[0] += 1
        row[1] += r.amount
        row[2] += r.commission
    return [PartnerTotal(p, c, n, a, k) for (p, c), (n, a, k) in sorted(acc.items())]


#: reward counter -> its column in a :class:`RewardTotal` row: issued counts
#: credits, redeemed and expired count debits (the amount negated)
_COLUMNS = {ISSUANCE: 0, REDEMPTION: 1, EXPIRY: 2}


def reward_totals(flows: Iterable[RewardFlow]) -> list[RewardTotal]:
    """Issued = credited from issuance; redeemed and expired = debited to those accounts.

    A reversal (a posting the other way) counts negatively, so totals stay the
    net movement against each system account.
    """
    acc: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for f in flows:
        row = acc[(f.partner, f.fund, f.unit)]
        counted = False
        for counter, amount in f.shares.items():
            column = _COLUMNS.get(counter)
            if column is not None:
                row[column] += -amount if column else amount
                counted = True
        if counted:
            row[3] += 1
    return [
        RewardTotal(p, fund, unit, i, r, e, n)
        for (p, fund, unit), (i, r, e, n) in sorted(acc.items())
    ]


# --- rendering -------------------------------------------------------------------


#: what a spreadsheet reads as the start of a formula in a cell (OWASP, CSV injection)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


#: what makes a field quoted (RFC 4180): Python's csv module (3.11) leaves a lone
#: carriage return unquoted where the line end is ``\n``, and readers split the row there
_QUOTED = frozenset(',"\r\n')


def _csv_cell(value: object) -> str:
    """One field: a text cell a spreadsheet would read as a formula (a partner named
    ``=HYPERLINK(...)`` in transaction metadata) gets a leading ``'``, and a field
    holding a comma, a quote or a line break is quoted, quotes doubled. Numbers are
    written as they are; the JSON keeps the text unchanged."""
    if not isinstance(value, str):
        return str(value)
    text = "'" + value if value.startswith(_FORMULA_STARTS) else value
    if _QUOTED.isdisjoint(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    lines = [header, *rows]
    return "".join(",".join(map(_csv_cell, line)) + "\n" for line in lines).encode("utf-8")


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _window(start: int, end: int) -> dict[str, str]:
    return {
        "name": window_name(start, end),
        "start": iso(from_epoch(start)),
        "end": iso(from_epoch(end)),
    }


def render_billing(
    program: str, start: int, end: int, records: Iterable[BillingRecord]
) -> dict[str, bytes]:
    """The billing report of one window: totals and line items, CSV and JSON."""
    items = sort_records(records)
    totals = partner_totals(items)
    total_rows = [[t.partner, t.currency, t.records, t.amount, t.commission] for t in totals]
    line_rows = [
        [
            r.id,
            r.partner,
            r.order_id,
            iso(r.time),
            r.currency,
            r.amount,
            r.rate,
            r.commission,
            "true" if r.late else "false",
        ]
        for r in items
    ]
    doc = {
        "program": program,
        "kind": str(ReportKind.BILLING),
        "window": _window(start, end),
        "records": len(items),
        "totals": [
            {
                "partner": t.partner,
                "currency": t.currency,
                "records": t.records,
                "amount": t.amount,
                "commission": t.commission,
            }
            for t in totals
        ],
        "line_items": [
            {
                "record_id": r.id,
                "partner": r.partner,
                "order_id": r.order_id,
                "time": iso(r.time),
                "currency": r.currency,
                "amount": r.amount,
                "rate": r.rate,
                "commission": r.commission,
                "late": r.late,
            }
            for r in items
        ],
    }
    names = FILES[ReportKind.BILLING]
    return {
        names[0]: _csv(["partner", "currency", "records", "amount", "commission"], total_rows),
        names[1]: _csv(
            [
                "record_id",
                "partner",
                "order_id",
                "time",
                "currency",
                "amount",
                "rate",
                "commission",
                "late",
            ],
            line_rows,
        ),
        names[2]: _json(doc),
    }


def render_rewards(
    program: str, start: int, end: int, flows: Iterable[RewardFlow]
) -> dict[str, bytes]:
    """Points (and any fund) issued, redeemed and expired per partner and fund."""
    totals = reward_totals(flows)
    header = ["partner", "fund", "unit", "issued", "redeemed", "expired", "entries"]
    rows = [[t.partner, t.fund, t.unit, t.issued, t.redeemed, t.expired, t.entries] for t in totals]
    doc = {
        "program": program,
        "kind": str(ReportKind.REWARDS),
        "window": _window(start, end),
        "totals": [dict(zip(header, row, strict=True)) for row in rows],
    }
    names = FILES[ReportKind.REWARDS]
    return {names[0]: _csv(header, rows), names[1]: _json(doc)}

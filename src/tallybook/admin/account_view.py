"""What the account page shows, gathered from the capability services.

Each section is read on its own: a capability that fails (not configured for the
program, or a store error) leaves a message in its section instead of taking
the page down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from tallybook.admin.chart import Point, balance_chart
from tallybook.admin.money import format_amount
from tallybook.admin.timeline import timeline
from tallybook.domain.model import Account, Program
from tallybook.domain.notifications import DismissReason, Notification, Status
from tallybook.domain.wallet import Hold, HoldKind, HoldStatus
from tallybook.errors import ConfigError, TallybookError, ValidationError
from tallybook.ledger import Ledger

#: entries drawn in the chart at most (the newest ones in the filtered range)
CHART_POINTS = 500
PAGE_SIZES = (10, 25, 50, 100)
#: the ``fund`` filter value of the timeline across all funds (the default view)
ALL_FUNDS = "all"
NOTIFICATION_PAGE = 20

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BalanceRow:
    fund: str
    unit: str
    total: int
    withheld: int
    available: int


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    #: a fund's name, or :data:`ALL_FUNDS` for the timeline of every fund
    fund: str
    since: str = ""
    until: str = ""
    oldest_first: bool = False
    limit: int = 25
    cursor: str | None = None

    @property
    def all_funds(self) -> bool:
        return self.fund == ALL_FUNDS

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        """``since`` from the start of its day, ``until`` to the end of its day (UTC)."""
        since = _day(self.since, "from") if self.since else None
        until = _day(self.until, "to") + timedelta(days=1) if self.until else None
        if since and until and since >= until:
            raise ValidationError("the 'from' date must not be after the 'to' date")
        return since, until

    def query(self, **changes: Any) -> dict[str, str]:
        """Query parameters for a link to this filter with ``changes``."""
        values = {
            "fund": self.fund,
            "since": self.since,
            "until": self.until,
            "order": "oldest" if self.oldest_first else "newest",
            "limit": str(self.limit),
            "cursor": self.cursor or "",
        }
        values.update({k: "" if v is None else str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True, slots=True)
class Section:
    """One part of the page: its rows, or why it could not be shown."""

    rows: list[Any] = field(default_factory=list)
    error: str = ""
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class AccountPage:
    account: Account
    program: Program
    balances: list[BalanceRow]
    tier: str | None
    tier_note: str
    filter: HistoryFilter
    #: entries of one fund, or timeline events (:class:`Event`) when ``filter.all_funds``
    history: Section
    chart_svg: str
    chart_note: str
    holds: Section
    active: Section
    sent: Section

    def unit(self, fund: str) -> str:
        spec = self.program.fund(fund)
        return spec.unit if spec else self.program.currency


def _day(text: str, what: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise ValidationError(f"the {what!r} date must look like 2026-01-31") from None


def _section(read: Callable[[], T], wrap: Callable[[T], Section]) -> Section:
    try:
        return wrap(read())
    except TallybookError as exc:
        return Section(error=exc.message)


def balances(ledger: Ledger, program: Program, account: Account) -> list[BalanceRow]:
    """Per fund: total, withheld, available; wallet funds as the wallet counts them
    (bonus: unexpired grants only)."""
    from tallybook.services.ledger.accounts import balances_of

    rows = {
        b.fund: BalanceRow(b.fund, b.unit, b.balance, b.held, b.available)
        for b in balances_of(program, account)
    }
    try:
        wallet = ledger.wallet.balance(program.id, account.id)
    except TallybookError:
        return list(rows.values())
    for v in wallet.funds:
        rows[v.fund] = BalanceRow(v.fund, v.unit, v.total, v.withheld, v.available)
    return [rows[f.name] for f in program.funds if f.name in rows]


def tier_of(ledger: Ledger, program: str, account: str) -> tuple[str | None, str]:
    try:
        status = ledger.loyalty.status(program, account)
    except ConfigError:
        return None, "no loyalty program"
    except TallybookError as exc:
        return None, exc.message
    if status.next_tier is None:
        return status.tier, f"{status.qualifying_points:,} qualifying points (top tier)"
    return status.tier, (
        f"{status.qualifying_points:,} qualifying points; "
        f"{status.points_to_next_tier:,} to {status.next_tier}"
    )


def chart(ledger: Ledger, program: Program, account: str, flt: HistoryFilter) -> tuple[str, str]:
    """The chart's SVG and a caption, from the newest entries of the filtered range."""
    if flt.all_funds:
        return "", "choose a fund to see its balance over time"
    since, until = flt.bounds()
    page = ledger.accounts.history(
        program.id, account, flt.fund, since=since, until=until, limit=CHART_POINTS
    )
    spec = program.fund(flt.fund)
    unit = spec.unit if spec else program.currency

    def fmt(value: int) -> str:
        return format_amount(value, unit)

    points = [
        Point(e.created_at, e.balance, f"{e.type} {format_amount(e.amount, unit, signed=True)}")
        for e in page.entries
    ]
    note = f"{len(points)} entries"
    if page.cursor is not None:
        note = f"the newest {CHART_POINTS} entries"
    return balance_chart(points[::-1], title=f"{flt.fund} balance", fmt=fmt), note


def actionable(hold: Hold) -> bool:
    """Agents capture or void authorisations; held credits release on their date."""
    return hold.kind is HoldKind.DEBIT and hold.status is HoldStatus.ACTIVE


def build(
    ledger: Ledger, program_id: str, account_id: str, flt: HistoryFilter, ncursor: str | None
) -> AccountPage:
    """Every section of the account page; raises if the account does not exist."""
    # the loyalty status first: it expires points past their date, which the
    # balances read next must not show
    tier, tier_note = tier_of(ledger, program_id, account_id)
    account = ledger.accounts.get(program_id, account_id)
    program = ledger.programs.get(program_id)

    def history() -> Section:
        since, until = flt.bounds()
        if flt.all_funds:
            events = timeline(
                ledger,
                program_id,
                account_id,
                [f.name for f in program.funds],
                since=since,
                until=until,
                newest_first=not flt.oldest_first,
                limit=flt.limit,
                cursor=flt.cursor,
            )
            return Section(list(events.events), cursor=events.cursor)
        page = ledger.accounts.history(
            program_id,
            account_id,
            flt.fund,
            newest_first=not flt.oldest_first,
            since=since,
            until=until,
            limit=flt.limit,
            cursor=flt.cursor,
        )
        return Section(list(page.entries), cursor=page.cursor)

    hist = _section(history, lambda s: s)
    try:
        chart_svg, chart_note = chart(ledger, program, account_id, flt)
    except TallybookError as exc:
        chart_svg, chart_note = "", exc.message
    return AccountPage(
        account=account,
        program=program,
        balances=balances(ledger, program, account),
        tier=tier,
        tier_note=tier_note,
        filter=flt,
        history=hist,
        chart_svg=chart_svg,
        chart_note=chart_note,
        holds=_section(lambda: ledger.wallet.holds(program_id, account_id), lambda h: Section(h)),
        active=_section(
            lambda: ledger.notifications.list(program_id, account_id),
            lambda n: Section(list(n)),
        ),
        sent=_section(
            lambda: ledger.notifications.history(
                program_id, account_id, limit=NOTIFICATION_PAGE, cursor=ncursor
            ),
            lambda p: Section(p.notifications, cursor=p.cursor),
        ),
    )


def dismissal(n: Notification) -> str:
    """Why and by what a notification left the active list, as a sentence."""
    by = n.dismissed_by or ""
    match n.dismiss_reason:
        case DismissReason.SUPERSEDED:
            return f"Replaced by a newer {n.type} notification ({by})."
        case DismissReason.USER:
            return "Dismissed on request (through the API, the CLI or this page)."
        case DismissReason.RULE:
            return f"Dismissed by notification {by}, whose type's rule dismisses {n.type}."
        case DismissReason.TOPPED_UP:
            return f"Dismissed when the fund was topped up again (transaction {by})."
        case DismissReason.THRESHOLD_CHANGED:
            return "Dismissed when the fund's low-balance threshold was cleared or lowered."
        case None:
            return "Expired." if n.status == Status.EXPIRED else ""
        case other:
            return f"Dismissed ({other}) by {by}." if by else f"Dismissed ({other})."

"""Loyalty jobs: expire lots past their date, warn before, and apply tier downgrades.

The expiry job never scans: lots are indexed on gsi2 by expiry day (4 shards
a day), and a checkpoint item remembers the last day fully processed, so a run
reads only the days since the previous run. Each account's expired lots go in
one transaction whose id is ``expire:{account}:{cumulative end of the last lot}``,
so re-running, or two jobs at once, expire every point exactly once. Expiring
deletes nothing: it moves the member's ``lots_used`` counter past the lots and
their ``live_from`` bound past their entries (store/records/loyalty.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import cast

from tallybook.domain.model import EXPIRY, Account, Leg, TxnType
from tallybook.domain.tiers import (
    MemberState,
    decide_tier,
    expiry_text,
    last_qualified,
    lots_may_be_due,
    qualifying_points,
    with_next_expiry,
)
from tallybook.errors import DamagedItem, NotFound
from tallybook.services.events import LedgerEvent
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.loyalty.lots import due_lots, expiring_lots
from tallybook.services.loyalty.tiers import (
    announce,
    apply_tier,
    stopped_qualifying,
    tier_members,
)
from tallybook.services.loyalty.values import config_of, scoped_txn_id
from tallybook.store.port import Value
from tallybook.store.records import loyalty as lot_records
from tallybook.store.records.codec import iso
from tallybook.store.records.loyalty import accounts_due

#: (done, total) after each step of a job
Progress = Callable[[int, int], None]
#: lots expired (and deleted) per transaction, well under the 100-action limit
LOTS_PER_TXN = 80


@dataclass
class ExpiryReport:
    days: int = 0
    #: accounts whose lots this run expired
    accounts: int = 0
    lots: int = 0
    points: int = 0
    transactions: int = 0
    #: accounts warned (PointsExpiring raised, or raised before for the same points)
    warned: int = 0
    #: accounts whose warning failed (kept conflicting, or a store error): logged;
    #: the next run warns them, while the points are still ahead
    warnings_failed: int = 0
    #: members left as they are, as an item the job needs does not read (a lot):
    #: what is wrong with it; the checkpoint stays before their day, so the next
    #: run reads it again
    skipped: list[str] = field(default_factory=list)


@dataclass
class ReviewReport:
    members: int = 0
    downgraded: int = 0


def _taken(
    state: MemberState, points: int, expired: list[lot_records.ExpiringLot]
) -> list[tuple[int, datetime | None]]:
    """The points an expiry of ``points`` takes from each of the ``expired`` lots
    (oldest first), with the lot's date."""
    out: list[tuple[int, datetime | None]] = []
    for lot in expired:
        left = max(0, min(lot.amount, lot.cum_end - state.lots_used, points))
        points -= left
        out.append((left, lot.expires))
    return out


class _NothingExpires(Exception):
    """The lots due hold no points any more: the expiry job writes nothing."""


class ExpiryJob:
    def __init__(self, core: LedgerCore) -> None:
        self.core = core
        self.store = core.store

    def run(self, program: str, *, progress: Progress | None = None) -> ExpiryReport:
        cfg = config_of(self.core.programs.get(program))
        prog = self.core.programs.get(program)
        now = self.core.clock.now()
        today = now.date()
        checkpoint = lot_records.read_expiry_checkpoint(self.store, program)
        start = checkpoint + timedelta(days=1) if checkpoint else prog.created_at.date()
        past = [start + timedelta(days=i) for i in range((today - start).days + 1)]
        ahead = [today + timedelta(days=i) for i in range(1, cfg.expiry.warn_days + 1)]
        total = len(past) + len(ahead)
        report = ExpiryReport(days=len(past))
        horizon = now + timedelta(days=cfg.expiry.warn_days)
        seen: set[str] = set()
        warned: set[str] = set()
        #: the checkpoint never passes the day before a member left as they are
        through = today - timedelta(days=1)
        for done, day in enumerate(past, 1):
            due = self._accounts_due(program, day)
            for account in due:
                if account not in seen:
                    seen.add(account)
                    written = report.transactions
                    try:
                        self._expire_account(program, account, now, report)
                    except DamagedItem as exc:  # the other members go on
                        report.skipped.append(f"{account}: {exc.message}")
                        warned.add(account)
                        through = min(through, day - timedelta(days=1))
                        continue
                    # counted when this run expired its lots, not when it only looked:
                    # a re-run, or lots a read or an earn already expired, expire none
                    if report.transactions > written:
                        report.accounts += 1
            if day == today and ahead:
                # lots due later today are within the horizon too (the days after
                # today are read below)
                for account in due:
                    if account not in warned:
                        warned.add(account)
                        self._warn(program, account, horizon, report)
            if progress:
                progress(done, total)
        if past and (checkpoint is None or checkpoint < through):
            self.store.transact_write([lot_records.expiry_checkpoint_put(program, through)])
        for done, day in enumerate(ahead, len(past) + 1):
            for account in self._accounts_due(program, day):
                if account not in warned:
                    warned.add(account)
                    self._warn(program, account, horizon, report)
            if progress:
                progress(done, total)
        return report

    def settle(self, program: str, account: str) -> str | None:
        """Expire one member's lots past their date now, as the job would (an earn,
        redeem or read met them first); the expiry of the oldest lot left."""
        return self._expire_account(program, account, self.core.clock.now(), ExpiryReport())

    def _accounts_due(self, program: str, day: date) -> list[str]:
        return accounts_due(self.store, program, day.isoformat())

    def _expire_account(
        self, program: str, account: str, now: datetime, report: ExpiryReport
    ) -> str | None:
        """Expire the member's lots due by ``now``; the expiry of the oldest lot left
        (None: no lot left, or not known)."""
        cfg = config_of(self.core.programs.get(program))
        for attempt in range(1000):
            try:
                head = self.core.accounts.get(program, account)
            except NotFound:
                return None
            state = MemberState.from_value(head.attributes.get("loyalty"))
            due, after = due_lots(
                self.store, program, cfg.fund, account, state, now, limit=LOTS_PER_TXN
            )
            if not due:
                if not attempt:
                    self._recover(program, account, head, state)
                return None if after is None else expiry_text(after.expires)
            # one partner's lots a transaction: the rewards report files expired
            # points under the partner of the earn that issued them
            cut = next((i for i, lot in enumerate(due) if lot.partner != due[0].partner), None)
            expired = due if cut is None else due[:cut]
            if cut is not None:
                after = due[cut]
            following = None if after is None else expiry_text(after.expires)
            last = expired[-1]
            txn_id = _expire_txn(account, last.cum_end)
            plan = self._planner(program, account, expired, txn_id, following)
            body = {"op": "expire", "account": account, "through": last.cum_end}
            try:
                txn = self.core.engine.commit(program, txn_id, body, plan, lock=[account])
            except (NotFound, _NothingExpires):
                return None
            if not txn.replay:
                report.transactions += 1
                report.lots += len(expired)
                report.points += cast(int, txn.details["points"])
            announce(self.core, txn, account)
            if cut is None and len(due) < LOTS_PER_TXN:
                return following
        return None

    def _recover(self, program: str, account: str, head: Account, state: MemberState) -> None:
        """A run that died after its last expiry of this member committed left what
        that expiry raises (TierChanged, LowBalance) unraised: when that expiry is
        still the member's last change (the head says so: no read otherwise), its
        record is replayed, which raises it (once: the keys are the transaction's)."""
        txn_id = _expire_txn(account, state.lots_used)
        if state.lots_used and self.core.engine.last_change_was(head, txn_id):
            txn = self.core.engine.recover(program, txn_id)
            if txn is not None:
                announce(self.core, txn, account)

    def _planner(
        self,
        program: str,
        account: str,
        expired: list[lot_records.ExpiringLot],
        txn_id: str,
        following: str | None,
    ) -> Callable[[Snapshot], Plan]:
        """Expire what is left of the ``expired`` lots (oldest first); the next lot
        left expires at ``following``."""
        last, last_us, lots = expired[-1].cum_end, expired[-1].at_us, len(expired)

        def plan(snap: Snapshot) -> Plan:
            cfg = config_of(self.core.programs.get(program))
            acct = snap.account(account)
            state = MemberState.from_value(acct.attributes.get("loyalty"))
            fund = acct.fund(cfg.fund)
            # points redeemed meanwhile moved lots_used: only the rest expires, and
            # never more than is available (points debited outside loyalty)
            points = max(0, min(last - state.lots_used, fund.available))
            if last <= state.lots_used:
                # redeemed meanwhile: nothing expires and nothing moves, so write
                # nothing rather than an empty transaction in the member's history
                raise _NothingExpires
            # points == 0: the lots' points were debited outside loyalty. Nothing
            # expires, but the counters still move past the lots (a transaction
            # without legs): left due, they would expire the member's next points
            new_state = replace(
                state,
                lots_used=max(state.lots_used, last),
                live_from=max(state.live_from, last_us + 1),
                # an earn meanwhile may have started the lots after these: not known
                next_expiry=None,
            )
            new_state = with_next_expiry(new_state, following)
            p = Plan(type=TxnType.EXPIRE, owner=account, allow_empty=not points)
            if expired[0].partner:
                p.metadata = {"partner": expired[0].partner}
            if points:
                p.legs = [Leg(account, cfg.fund, -points), Leg(EXPIRY, cfg.fund, points)]
            balance = fund.balance - points
            decision = apply_tier(
                p,
                snap,
                cfg,
                account,
                state,
                new_state,
                balance,
                txn_id,
                "expiry",
                held_until=stopped_qualifying(
                    cfg, state, fund.balance, _taken(state, points, expired)
                ),
            )
            p.details.update(
                {
                    "account": account,
                    "points": points,
                    "lots": lots,
                    "through": last,
                    "tier": decision.tier,
                    "previous_tier": decision.previous,
                }
            )
            return p

        return plan

    def _warn(self, program: str, account: str, horizon: datetime, report: ExpiryReport) -> None:
        try:
            acct = self.core.accounts.get(program, account)
        except NotFound:
            return
        try:
            self._warn_of(program, acct, horizon, report)
        except DamagedItem as exc:  # the other members go on
            report.skipped.append(f"{account}: {exc.message}")

    def _warn_of(
        self, program: str, acct: Account, horizon: datetime, report: ExpiryReport
    ) -> None:
        account = acct.id
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        cfg = config_of(self.core.programs.get(program))
        available = acct.fund(cfg.fund).available
        lots = expiring_lots(self.store, program, cfg.fund, account, state, horizon, available)
        if not lots:
            return
        first = lots[0]
        payload: dict[str, Value] = {
            "points": sum(lot.points for lot in lots),
            "expires": iso(first.expires) if first.expires else None,
            "lots": len(lots),
        }
        raised = self.core.events.publish(
            LedgerEvent(
                program,
                account,
                "PointsExpiring",
                dict(payload),
                # what is expiring, not only its first lot: the same lots warn once,
                # more lots entering the horizon (or a partial redeem) warn anew
                source_id=f"expiring:{first.cum_end}:{payload['points']}:{len(lots)}",
                # listed until its first lot expires (the job then warns of the rest)
                expires_at=first.expires,
            )
        )
        if raised:
            report.warned += 1
        else:
            report.warnings_failed += 1


def settled_head(core: LedgerCore, program: str, head: Account) -> Account:
    """The member's ``head`` once their lots past their date are expired (read again
    only when ``head`` shows that one may be; NotFound if the account is gone)."""
    state = MemberState.from_value(head.attributes.get("loyalty"))
    if not lots_may_be_due(state, core.clock.now()):
        return head
    ExpiryJob(core).settle(program, head.id)
    return core.accounts.get(program, head.id)


def _expire_txn(account: str, last: int) -> str:
    return scoped_txn_id("expire", account, str(last))


def review_tiers(
    core: LedgerCore, program: str, *, progress: Progress | None = None
) -> ReviewReport:
    """Walk the tier index from the top tier down and apply the downgrade rule."""
    cfg = config_of(core.programs.get(program))
    report = ReviewReport()
    seen: set[str] = set()
    for tier in reversed(cfg.tiers[1:]):
        cursor: str | None = None
        while True:
            page = tier_members(core, program, tier.name, limit=200, cursor=cursor)
            for account in page.accounts:
                if account in seen:
                    continue
                seen.add(account)
                report.members += 1
                if _review(core, program, account):
                    report.downgraded += 1
                if progress:
                    progress(report.members, 0)
            if page.cursor is None:
                break
            cursor = page.cursor
    return report


def _review(core: LedgerCore, program: str, account: str) -> bool:
    """Apply the downgrade rule to one member; True when the tier changed."""
    try:
        before = core.accounts.get(program, account)
        # points past their date count for nothing: expire them first (the expiry
        # decides the tier too, and may be what moves it)
        head = settled_head(core, program, before)
    except NotFound:
        return False
    cfg = config_of(core.programs.get(program))
    state = MemberState.from_value(head.attributes.get("loyalty"))
    expired_moved = state.tier != MemberState.from_value(before.attributes.get("loyalty")).tier
    now = core.clock.now()
    balance = head.fund(cfg.fund).balance
    qualifying = qualifying_points(cfg, state, now, balance)
    held = last_qualified(cfg, state, balance, now)
    if not decide_tier(cfg, state, qualifying, now, held).changed:
        # a run that died after this member's review committed: the review is
        # still the head's last write and change, so replay it (raises TierChanged)
        last = scoped_txn_id("tier", account, str(head.version - 1))
        if core.engine.last_change_was(head, last):
            txn = core.engine.recover(program, last)
            if txn is not None:
                announce(core, txn, account)
        return expired_moved
    txn_id = scoped_txn_id("tier", account, str(head.version))

    def plan(snap: Snapshot) -> Plan:
        cfg = config_of(core.programs.get(program))
        acct = snap.account(account)
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        p = Plan(type="tier", owner=account, allow_empty=True)
        decision = apply_tier(
            p, snap, cfg, account, state, state, acct.fund(cfg.fund).balance, txn_id, "review"
        )
        p.details.update(
            {"account": account, "tier": decision.tier, "previous_tier": decision.previous}
        )
        return p

    txn = core.engine.commit(
        program, txn_id, {"op": "review", "account": account}, plan, lock=[account]
    )
    announce(core, txn, account)
    return bool(txn.details.get("tier_changed")) and not txn.replay

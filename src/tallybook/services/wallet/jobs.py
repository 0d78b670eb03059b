"""Wallet jobs: grant expiry, hold expiry and ``reconcile``; plus the wallet invariant check.

The jobs read the sparse due index (``WDUE#{program}#{kind}#{shard}``) up to
now, never the table. Each row is re-read with a consistent read and resolved
through a conditional write, so a job is idempotent and safe to run while
traffic flows: a capture racing an expiry is settled by whichever transaction
flips the row first, the other sees the new status.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from tallybook.domain.ids import check_id, check_progress, derived_id
from tallybook.domain.model import EXPIRY, Account, Leg, Transaction, TxnType
from tallybook.domain.wallet import (
    BONUS,
    Grant,
    GrantTake,
    Hold,
    HoldKind,
    HoldStatus,
    unexpired_bonus,
)
from tallybook.errors import ConditionFailed, DamagedItem, InvalidState, NotFound
from tallybook.services.ledger.check import ATTEMPTS
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.wallet.charges import ChargeProcessor
from tallybook.services.wallet.debit import CHARGE_GRACE
from tallybook.services.wallet.marks import bonus_without_grants, wallet_marks
from tallybook.services.wallet.records import availability_after, present_funds
from tallybook.store.port import Item, Key
from tallybook.store.records.codec import iso
from tallybook.store.records.ledger import checked_head
from tallybook.store.records.wallet import (
    CHARGE_PENDING,
    DUE_CHARGE,
    DUE_GRANT,
    DUE_HOLD,
    ChargeIntent,
    cancelling_charge,
    charge_of,
    charge_problem,
    checked_charges,
    checked_grants,
    checked_holds,
    drop_charge,
    drop_hold,
    due_rows,
    expire_grant,
    grant_account,
    grant_from_item,
    grant_key,
    grant_left,
    grant_problem,
    hold_from_item,
    hold_problem,
    is_due,
    marks_of,
    marks_problem,
    read_grants,
    row_key,
    takes_value,
    undue_empty_grant,
)

if TYPE_CHECKING:
    from tallybook.services.wallet.holds import HoldOps

Progress = Callable[[int], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GrantExpiry:
    account: str
    grant_id: str
    amount: int


@dataclass
class ReconcileReport:
    cancelled_charges: list[tuple[str, str, int]] = field(default_factory=list)
    orphan_holds: list[tuple[str, str]] = field(default_factory=list)
    expired_holds: list[tuple[str, str]] = field(default_factory=list)
    released_credits: list[tuple[str, str]] = field(default_factory=list)
    expired_grants: list[GrantExpiry] = field(default_factory=list)
    #: charge intents whose refund the processor failed (account, txn, amount, error):
    #: they stay, and the next run tries again
    failed_refunds: list[tuple[str, str, int, str]] = field(default_factory=list)
    #: rows that do not read (``wallet check`` reports them too), left as they are;
    #: and holds left unsettled as another hold of their owner does not read
    skipped: list[str] = field(default_factory=list)

    def undone(self) -> list[str]:
        """What this run left undone, in short (empty when nothing)."""
        out = []
        if self.failed_refunds:
            out.append(f"{len(self.failed_refunds)} refund(s) failed: the next run tries again")
        if self.skipped:
            out.append(
                f"{len(self.skipped)} row(s) skipped, malformed or beside one: see wallet check"
            )
        return out

    def lines(self) -> list[str]:
        out = [f"cancelled charge {t} of {a}: refunded {n}" for a, t, n in self.cancelled_charges]
        out += [
            f"could not refund charge {t} of {a} ({n}): {why}; the next reconcile tries again"
            for a, t, n, why in self.failed_refunds
        ]
        out += [f"skipped {line}" for line in self.skipped]
        out += [f"removed hold {h} of {a}: no transaction record" for a, h in self.orphan_holds]
        out += [f"expired hold {h} of {a}" for a, h in self.expired_holds]
        out += [f"released held credit {h} of {a}" for a, h in self.released_credits]
        out += [
            f"expired bonus grant {g.grant_id} of {g.account}: {g.amount} to @expiry"
            for g in self.expired_grants
        ]
        return out


class _NothingLeft(InvalidState):
    pass


class WalletJobs:
    def __init__(
        self, core: LedgerCore, holds: HoldOps, processor: Callable[[], ChargeProcessor]
    ) -> None:
        self.core = core
        self.store = core.store
        self.holds = holds
        self.processor = processor

    def reconcile(self, program: str, *, progress: Progress | None = None) -> ReconcileReport:
        """The recovery job (docs/wallet.md): refund and delete charge intents past
        their grace, resolve holds without a transaction record and holds or held
        credits past their deadline, expire grants past their date. Idempotent, and
        safe while the program is in use."""
        check_progress(progress)
        report = self.cancel_stale_charges(program, progress=progress)
        holds = self.expire_holds(program, progress=progress)
        report.orphan_holds = holds.orphan_holds
        report.expired_holds = holds.expired_holds
        report.released_credits = holds.released_credits
        report.skipped += holds.skipped
        report.expired_grants = self.expire_grants(
            program, progress=progress, skipped=report.skipped
        )
        return report

    def cancel_stale_charges(
        self, program: str, *, progress: Progress | None = None
    ) -> ReconcileReport:
        """Charge intents past their grace (none is a committed debit's charge, as a
        commit deletes its own): refund and remove them."""
        report = ReconcileReport()
        due = self._due(
            program, DUE_CHARGE, "charge intent", charge_problem, report.skipped, progress
        )
        for key, item in due:
            intent = charge_of(item)
            # a debit's commit deletes its own charge's intent: one still here is no
            # committed charge, even beside a committed debit (another attempt's
            # charge, or none, was recorded), so its key is refunded either way
            try:
                self.store.transact_write([cancelling_charge(key, intent.charge_key)])
            except ConditionFailed:
                continue  # committed (and removed) meanwhile, or another intent now
            try:
                self.processor().refund(key=intent.charge_key)
            except Exception as exc:
                # whatever the processor raised: the intent stays (cancelling, still
                # due), the next run refunds it, and this one goes on with the others
                log.exception("reconcile: the refund of charge %s failed", intent.charge_key)
                why = f"{type(exc).__name__}: {exc}"
                report.failed_refunds.append((intent.account, intent.txn_id, intent.amount, why))
                continue
            report.cancelled_charges.append((intent.account, intent.txn_id, intent.amount))
            # only this charge's intent: meanwhile the attempt that charged it may have
            # given up and removed it, and a retry put (and charged) one of its own
            with contextlib.suppress(ConditionFailed):
                self.store.transact_write([drop_charge(key, intent.charge_key)])
        return report

    def expire_holds(self, program: str, *, progress: Progress | None = None) -> ReconcileReport:
        """Holds past their deadline: expire debits, release held credits; and raise
        again what an expiry or release still in the index did not notify."""
        report = ReconcileReport()
        for _, item in self._due(program, DUE_HOLD, "hold", hold_problem, report.skipped, progress):
            hold = hold_from_item(item)
            try:
                self._expire_hold(program, hold, item, report)
            except DamagedItem as exc:  # another of the owner's holds does not read
                report.skipped.append(f"hold {hold.id} of {hold.account}: {exc.message}")
        return report

    def _expire_hold(self, program: str, hold: Hold, item: Item, report: ReconcileReport) -> None:
        """Settle one hold found due (see :meth:`expire_holds`)."""
        if hold.status in (HoldStatus.EXPIRED, HoldStatus.RELEASED) and is_due(item):
            # settled, but what it notifies was not done (a crash): replay it
            self.holds.expire(program, hold.account, hold.id)
            return
        if hold.status is not HoldStatus.ACTIVE:
            return
        if self.core.engine.existing(program, hold.id) is None:
            with contextlib.suppress(ConditionFailed):
                self.store.transact_write([drop_hold(row_key(item), hold.status)])
                report.orphan_holds.append((hold.account, hold.id))
            return
        result = self.holds.expire(program, hold.account, hold.id)
        if result.transaction is None or result.transaction.replay:
            return
        target = report.released_credits if hold.kind is HoldKind.CREDIT else report.expired_holds
        target.append((hold.account, hold.id))

    def expire_grants(
        self,
        program: str,
        *,
        progress: Progress | None = None,
        skipped: list[str] | None = None,
    ) -> list[GrantExpiry]:
        """Move what is left of each expired grant to ``@expiry``, once per grant;
        a grant that does not read, or whose owner has one, is left as it is and
        named in ``skipped`` (logged when no list is given)."""
        if skipped is None:
            skipped = []
            expired = self.expire_grants(program, progress=progress, skipped=skipped)
            for line in skipped:
                log.warning("expire_grants: skipped %s", line)
            return expired
        done: list[GrantExpiry] = []
        now = self.core.clock.now()
        due = self._due(
            program,
            DUE_GRANT,
            "bonus grant",
            grant_problem,
            skipped,
            progress,
            now=now,
            skip_resolved=True,
        )
        for key, item in due:
            grant = grant_from_item(item)
            account = grant_account(item)
            try:
                expiry = self._expire_one(program, account, grant, key, now)
            except DamagedItem as exc:  # another of the owner's grants does not read
                skipped.append(f"bonus grant {grant.id} of {account}: {exc.message}")
                continue
            if expiry is not None:
                done.append(expiry)
        return done

    def _due(
        self,
        program: str,
        kind: str,
        what: str,
        problem_of: Callable[[Item], str | None],
        skipped: list[str],
        progress: Progress | None,
        *,
        now: datetime | None = None,
        skip_resolved: bool = False,
    ) -> Iterator[tuple[Key, Item]]:
        """The rows of ``kind`` the due index shows up to ``now``, each re-read by key:
        one gone meanwhile (or, with ``skip_resolved``, resolved) is passed over, one that
        does not read is named in ``skipped`` (wallet check names it too) and the
        run goes on with the others."""
        check_progress(progress)
        self.core.programs.get(program)
        for row in due_rows(self.store, program, kind, now or self.core.clock.now()):
            if progress:
                progress(1)
            key = row_key(row)
            item = self.store.get(key)
            if item is None or (skip_resolved and not is_due(item)):
                continue
            problem = problem_of(item)
            if problem is not None:
                skipped.append(f"malformed {what} {key.sk} ({key.pk}): {problem}")
                continue
            yield key, item

    def _expire_one(
        self, program: str, account: str, grant: Grant, key: Key, now: datetime
    ) -> GrantExpiry | None:
        """Expire one grant found due (see :meth:`expire_grants`); what it moved."""
        if not grant.expired(now):
            return None
        if grant.available == 0:
            with contextlib.suppress(ConditionFailed):
                self.store.transact_write([undue_empty_grant(key)])
            return None
        try:
            txn = self._expire_grant(program, account, grant.id, grant.expires_at)
        except _NothingLeft:
            return None
        return None if txn.replay else GrantExpiry(account, grant.id, expired_amount(txn))

    def _expire_grant(
        self, program: str, account: str, grant_id: str, expires_at: datetime
    ) -> Transaction:
        key = grant_key(program, account, grant_id, expires_at)
        body = {"op": "wallet.expire_grant", "account": account, "grant": grant_id}

        def plan(snap: Snapshot) -> Plan:
            left = grant_left(snap.store.get(key))
            if left <= 0:
                raise _NothingLeft(f"grant {grant_id} has nothing left to expire")
            acct = snap.account(account)
            funds = present_funds(f.name for f in snap.program.funds)
            grants = read_grants(snap.store, program, account, snap.now)
            # never more than the fund has, should it have been debited outside the wallet
            moved = min(left, max(0, acct.fund(BONUS).available))
            legs = [Leg(account, BONUS, -moved), Leg(EXPIRY, BONUS, moved)] if moved else []
            marks = wallet_marks(acct, grants, snap.now, balance_delta={BONUS: -moved})
            return Plan(
                type=TxnType.EXPIRE,
                legs=legs,
                attrs={account: marks},
                allow_empty=True,
                actions=[expire_grant(key, left)],
                owner=account,
                details={
                    "account": account,
                    "grants": takes_value([GrantTake(grant_id, expires_at, left)], -1),
                    "expired": moved,
                    "availability": availability_after(acct, funds, grants, snap.now),
                },
            )

        return self.core.engine.commit(
            program, derived_id(grant_id, "expire"), body, plan, lock=[account]
        )

    # -- invariants ----------------------------------------------------------------

    def check(self, program: str, account: str) -> list[str]:
        """Holds match the heads' withheld amounts, grants match the bonus balance,
        no fund is below zero available, no charge intent outlived reconcile.

        The reads are no snapshot: a check that finds problems is run again (a hold
        voided between the head's read and the holds' is none), and what the last
        run finds is reported, as ``ledger.check`` does."""
        for _ in range(ATTEMPTS):
            problems = self.check_balances(program, account) + self.charges_due(program, account)
            if not problems:
                break
        return problems

    def charges_due(self, program: str, account: str) -> list[str]:
        """Charge intents in flight past their grace, or taken for refunding and not
        refunded (the processor failed the refund): no balance is wrong, but a charge
        may be taken that no debit records until reconcile refunds it."""
        now = self.core.clock.now()
        intents, problems = checked_charges(self.store, program, account)
        return problems + [
            charge_due_line(intent, account)
            for intent in intents
            if intent.created_at + CHARGE_GRACE <= now
        ]

    def check_balances(self, program: str, account: str) -> list[str]:
        """Invariant 2 over an account's wallet: withheld amounts, the bonus fund's
        grants, available amounts and the head's marks."""
        prog = self.core.programs.get(program)
        check_id(account, "account id")
        acct = checked_head(self.store, program, account)
        if acct is None:
            raise NotFound(f"account {account} not found in program {program}")
        if isinstance(acct, str):  # nothing of the wallet can be checked against it
            return [f"{account}: malformed head: {acct}"]
        now = self.core.clock.now()
        every, problems = checked_holds(self.store, program, account)
        holds = [h for h in every if h.status is HoldStatus.ACTIVE]
        for spec in prog.funds:  # every fund: one outside the wallet withholds nothing
            fund = spec.name
            state = acct.fund(fund)
            held = sum(h.amounts.get(fund, 0) for h in holds)
            if state.held != held:
                problems.append(f"{account}/{fund}: head withholds {state.held}, holds sum {held}")
            if state.available < 0 and not spec.allow_overdraft:
                problems.append(f"{account}/{fund}: available {state.available} below zero")
        for h in holds:
            reserved = sum(t.amount for t in h.grants)
            if reserved != h.amounts.get(BONUS, 0):
                problems.append(f"hold {h.id}: grants reserve {reserved}, bonus held differs")
            if self.core.engine.existing(program, h.id) is None:
                problems.append(f"hold {h.id} of {account} has no transaction record")
        due_grants, resolved, grant_problems = checked_grants(self.store, program, account)
        problems += grant_problems
        if prog.fund(BONUS) is not None:
            in_grants = sum(g.available for g in due_grants + resolved)
            reserved = sum(h.amounts.get(BONUS, 0) for h in holds if h.kind is HoldKind.DEBIT)
            balance = acct.fund(BONUS).balance
            if balance != in_grants + reserved:
                problems.append(
                    f"{account}/bonus: balance {balance} != grants {in_grants} + held {reserved}"
                )
            for g in resolved:
                if g.available > 0:
                    problems.append(
                        f"{account}/bonus: grant {g.id} was resolved by expiry but holds "
                        f"{g.available}"
                    )
        marks = marks_problem(acct)
        if marks is not None:
            problems.append(f"{account}: malformed wallet marks on its head: {marks}")
        else:
            problems += self._check_marks(
                acct, holds, due_grants, now, prog.fund(BONUS) is not None
            )
        return problems

    def _check_marks(
        self, acct: Account, holds: list[Hold], grants: list[Grant], now: datetime, has_bonus: bool
    ) -> list[str]:
        """The head's marks (``wallet_marks``) never let a balance read be wrong
        (``grants``: those in the due index)."""
        problems: list[str] = []
        due = marks_of(acct).hold_due
        if due is not None and any(h.deadline < due for h in holds):
            problems.append(f"{acct.id}: hold_due {iso(due)} is after an active hold's deadline")
        free = bonus_without_grants(acct, now) if has_bonus else None
        if free is not None:
            unexpired = unexpired_bonus(grants, now)
            if free != unexpired:
                problems.append(f"{acct.id}: marks give bonus {free}, unexpired grants {unexpired}")
        return problems


def charge_due_line(intent: ChargeIntent, account: str) -> str:
    """What the checks say of a charge intent past its grace."""
    grace = f"{CHARGE_GRACE.total_seconds() / 60:.0f} min"
    line, when = f"charge intent {intent.txn_id} of {account}", iso(intent.created_at)
    if intent.status == CHARGE_PENDING:
        line += f" in flight since {when}, past"
    else:
        line += f", made at {when} and taken for refunding (the refund has not completed), is past"
    return f"{line} its {grace} grace: reconcile will refund its charge and delete it"


def expired_amount(txn: Transaction) -> int:
    """What a grant's expiry moved to ``@expiry``."""
    return sum(leg.amount for leg in txn.legs if leg.account == EXPIRY)

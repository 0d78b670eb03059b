"""Two-phase debits and held credits: authorize, capture, void, expire, release.

A hold is one row ``H#{hold}`` plus the transaction that created it (the hold
id *is* that transaction's id), written together. Settling a hold is another
transaction with a derived id (``{hold}:capture``, ``:void``, ``:expire``,
``:release``) that flips the row's status on condition it is still active,
so capture, void and expiry race safely and each is idempotent.

Bonus reserved by a hold comes from specific grants. Released bonus goes back
to its grant, unless the grant has expired meanwhile: then it goes straight
to ``@expiry`` in the same transaction (see ``wallet_settle``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar, cast

from tallybook.domain.ids import check_fund, check_id, derived_id
from tallybook.domain.model import EXTERNAL, Leg, Transaction, TxnType
from tallybook.domain.money import check_amount
from tallybook.domain.times import check_time
from tallybook.domain.wallet import (
    BONUS,
    CREDIT_FUNDS,
    MAX_HOLD_ID,
    Hold,
    HoldKind,
    HoldStatus,
    allocate,
    check_future,
    check_hold_id,
    hold_deadline,
)
from tallybook.errors import (
    IdempotencyConflict,
    InsufficientFunds,
    InvalidState,
    NotFound,
    StoreError,
    TooManyRetries,
    ValidationError,
)
from tallybook.services.events import LedgerEvent
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.wallet.marks import (
    HoldsDue,
    settled_hold_due,
    wallet_marks,
    with_takes,
)
from tallybook.services.wallet.records import (
    WalletTransaction,
    availability_after,
    present_funds,
    wallet_transaction,
)
from tallybook.services.wallet.settle import (
    HoldNotActive,
    HoldOverdue,
    expired_message,
    settle_plan,
)
from tallybook.store.evaluate import apply_updates
from tallybook.store.port import Action, Item, Update, Value
from tallybook.store.records.codec import iso
from tallybook.store.records.ledger import read_transaction
from tallybook.store.records.wallet import (
    account_grants,
    hold_from_item,
    hold_key,
    hold_put,
    read_hold,
    read_holds,
    spend_grant,
    takes_value,
    undue_settled_hold,
)

T = TypeVar("T")

#: the longest ``release_in_days`` of a held credit (as a grant's ``expires_in_days``)
MAX_RELEASE_DAYS = 3660


#: rounds of settling overdue holds a write falling short goes through before it
#: gives up (each settles every hold due by then)
_SETTLE_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class HoldResult:
    hold: Hold
    #: the transaction this call applied (or replayed); None when nothing was left to do
    transaction: WalletTransaction | None


class HoldOps:
    def __init__(self, core: LedgerCore) -> None:
        self.store = core.store
        self.engine = core.engine
        self.events = core.events
        self.clock = core.clock

    # -- lookups -----------------------------------------------------------

    def account_of(self, program: str, hold_id: str) -> str:
        """A hold's owner, from the transaction that created it (hold id = its id)."""
        check_id(program, "program id")
        check_id(hold_id, "hold id", max_length=MAX_HOLD_ID)
        item = read_transaction(self.store, program, hold_id)
        owner = item.get("owner") if item else None
        details = item.get("details") if item else None
        if not isinstance(owner, str) or not isinstance(details, dict) or "hold_id" not in details:
            if item is None:
                self.engine.programs.get(program)  # an unknown program is named as such
            raise NotFound(f"hold {hold_id} not found in program {program}")
        return owner

    def get(self, program: str, account: str, hold_id: str) -> Hold:
        hold = read_hold(self.store, program, account, hold_id)
        if hold is None:
            raise NotFound(f"hold {hold_id} not found in program {program}")
        return hold

    # -- authorize / held credit --------------------------------------------

    def authorize(
        self,
        program: str,
        account: str,
        amount: int,
        *,
        hold_id: str,
        expires_in: int | None = None,
        description: str | None = None,
    ) -> HoldResult:
        """Withhold ``amount`` across funds in spend order until capture, void or deadline."""
        check_id(account, "account")
        amount = check_amount(amount)
        check_hold_id(hold_id)
        body = {
            "op": "wallet.authorize",
            "account": account,
            "amount": amount,
            "expires_in": expires_in,
            "description": description,
        }

        planned: list[Item] = []

        def plan(snap: Snapshot) -> Plan:
            acct = snap.account(account)
            due = settled_hold_due(snap.store, program, acct, snap.now)
            funds = present_funds(f.name for f in snap.program.funds)
            deadline = hold_deadline(snap.now, expires_in)
            grants = account_grants(snap.store, program, acct, snap.now)
            by_id = {g.id: g for g in grants}
            alloc = allocate(amount, grants, {f: acct.fund(f).available for f in funds}, snap.now)
            if alloc.shortfall:
                raise InsufficientFunds(
                    f"insufficient funds in the wallet of {account}: available "
                    f"{alloc.covered}, needed {amount}"
                )
            hold = Hold(
                hold_id,
                account,
                HoldKind.DEBIT,
                HoldStatus.ACTIVE,
                alloc.funds,
                alloc.grants,
                deadline,
                snap.now,
            )
            put = hold_put(program, hold)
            planned[:] = [put.item]
            actions: list[Action] = [put]
            actions += [spend_grant(program, account, by_id[t.grant_id], t) for t in alloc.grants]
            marks = wallet_marks(
                acct,
                with_takes(grants, alloc.grants, -1),
                snap.now,
                held_delta=alloc.funds,
                new_deadline=deadline,
                renewed_due=due,
            )
            return Plan(
                type=TxnType.AUTHORIZE,
                held={(account, f): x for f, x in alloc.funds.items()},
                attrs={account: marks},
                actions=actions,
                description=description,
                owner=account,
                details={
                    "account": account,
                    "hold_id": hold_id,
                    "held": cast(Value, alloc.funds),
                    "grants": takes_value(alloc.grants, -1),
                    "deadline": iso(deadline),
                    "availability": availability_after(
                        acct,
                        funds,
                        grants,
                        snap.now,
                        held_delta=alloc.funds,
                        bonus_delta=-alloc.funds.get(BONUS, 0),
                    ),
                },
            )

        txn = self.settling(
            program,
            account,
            lambda: self.engine.commit(program, hold_id, body, plan, lock=[account]),
        )
        return HoldResult(self._written(txn, planned, program, account), wallet_transaction(txn))

    def _written(self, txn: Transaction, planned: list[Item], program: str, account: str) -> Hold:
        """The hold as the committed plan wrote it (no read back); a replay reads it,
        as it may have changed since."""
        if txn.replay or not planned:
            return self.get(program, account, txn.id)
        return hold_from_item(planned[0])

    def credit_held(
        self,
        program: str,
        account: str,
        fund: str,
        amount: int,
        *,
        release_at: datetime | None = None,
        release_in_days: int | None = None,
        txn_id: str,
        description: str | None = None,
    ) -> HoldResult:
        """Credit ``fund`` now but keep it pending (withheld) until ``release_at``, or
        ``release_in_days`` after it is credited (a retry of either keeps the first answer)."""
        check_id(account, "account")
        check_fund(fund)
        amount = check_amount(amount)
        check_hold_id(txn_id, "a held credit's txn_id (also its hold id)")
        if (release_at is None) == (release_in_days is None):
            raise ValidationError("give exactly one of release_at or release_in_days")
        if release_at is not None:
            release_at = check_time(release_at, "release_at")
        elif (
            isinstance(release_in_days, bool)
            or not isinstance(release_in_days, int)
            or not 1 <= release_in_days <= MAX_RELEASE_DAYS
        ):
            raise ValidationError(
                f"release_in_days must be an integer from 1 to {MAX_RELEASE_DAYS}"
            )
        if fund not in CREDIT_FUNDS:
            raise ValidationError(f"held credits go to {' or '.join(CREDIT_FUNDS)}, not {fund}")
        body = {
            "op": "wallet.credit_held",
            "account": account,
            "fund": fund,
            "amount": amount,
            # the request as given: a retry of "in 14 days" is the same request tomorrow
            **(
                {"release_at": iso(release_at)}
                if release_at is not None
                else {"release_in_days": release_in_days}
            ),
            "description": description,
        }

        planned: list[Item] = []

        def plan(snap: Snapshot) -> Plan:
            if release_at is None:
                release = snap.now + timedelta(days=cast(int, release_in_days))
            else:
                release = check_future(release_at, snap.now, "release_at")
            acct = snap.account(account)
            due = settled_hold_due(snap.store, program, acct, snap.now)
            funds = present_funds(f.name for f in snap.program.funds)
            grants = account_grants(snap.store, program, acct, snap.now)
            hold = Hold(
                txn_id,
                account,
                HoldKind.CREDIT,
                HoldStatus.ACTIVE,
                {fund: amount},
                (),
                release,
                snap.now,
            )
            put = hold_put(program, hold)
            planned[:] = [put.item]
            marks = wallet_marks(
                acct,
                grants,
                snap.now,
                balance_delta={fund: amount},
                held_delta={fund: amount},
                new_deadline=release,
                renewed_due=due,
            )
            return Plan(
                type=TxnType.CREDIT,
                legs=[Leg(account, fund, amount), Leg(EXTERNAL, fund, -amount)],
                held={(account, fund): amount},
                attrs={account: marks},
                actions=[put],
                description=description,
                owner=account,
                details={
                    "account": account,
                    "hold_id": txn_id,
                    "held": {fund: amount},
                    "release_at": iso(release),
                    "availability": availability_after(acct, funds, grants, snap.now),
                },
            )

        txn = self.settling(
            program,
            account,
            lambda: self.engine.commit(program, txn_id, body, plan, lock=[account]),
        )
        return HoldResult(self._written(txn, planned, program, account), wallet_transaction(txn))

    # -- settle ---------------------------------------------------------------

    def capture(self, program: str, hold_id: str, amount: int | None = None) -> HoldResult:
        """Spend ``amount`` (default: all) of a hold; the rest is released."""
        if amount is not None:
            amount = check_amount(amount)
        account = self.account_of(program, hold_id)
        try:
            return self._settle(program, account, hold_id, "capture", amount)
        except HoldOverdue as exc:
            if self.expire(program, account, hold_id).hold.status is not HoldStatus.EXPIRED:
                # settled otherwise meanwhile (perhaps by this same capture, applied
                # by a request whose answer was lost): answer as that settlement
                return self.capture(program, hold_id, amount)
            raise InvalidState(expired_message(exc.hold)) from None
        except HoldNotActive as exc:
            if exc.hold.status is HoldStatus.EXPIRED:
                raise InvalidState(expired_message(exc.hold)) from None
            raise
        except IdempotencyConflict:
            # a hold is captured once (a partial capture releases the rest): another
            # capture of it is refused by its state, like one of a voided hold
            hold = self.get(program, account, hold_id)
            raise InvalidState(
                f"hold {hold_id} was already captured ({hold.captured} of {hold.amount}, "
                "the rest released); it cannot be captured again, only a repeat of that "
                "same capture replays it"
                if hold.status is HoldStatus.CAPTURED
                else f"hold {hold_id} is {hold.status}; it cannot be captured"
            ) from None

    def void(self, program: str, hold_id: str) -> HoldResult:
        """Release a hold; voiding a voided or expired hold returns it unchanged."""
        account = self.account_of(program, hold_id)
        try:
            return self._settle(program, account, hold_id, "void", None)
        except HoldOverdue:
            result = self.expire(program, account, hold_id)
            if result.hold.status is not HoldStatus.EXPIRED:
                return self.void(program, hold_id)  # settled otherwise meanwhile
            return result
        except HoldNotActive as exc:
            if exc.hold.status in (HoldStatus.EXPIRED, HoldStatus.VOIDED):
                return HoldResult(exc.hold, None)
            raise

    def settle_overdue(self, program: str, account: str) -> bool:
        """Expire (or release) the owner's holds past their deadline; True if any was."""
        now = self.clock.now()
        due = [h for h in read_holds(self.store, program, account) if h.overdue(now)]
        for h in due:
            self.expire(program, account, h.id)
        return bool(due)

    def settling(self, program: str, account: str, write: Callable[[], T]) -> T:
        """``write``, again once the owner's overdue holds are settled if it fell short
        while one was due (a hold past its deadline, or a held credit past its release,
        no longer withholds anything, read or not).

        Another hold may come due while those are settled (a busy owner's short
        holds): it is settled in turn. Still due after that (a clock behind the
        head's marks) is no refusal, which would be final: the same request may
        run again (:class:`TooManyRetries`)."""
        for _ in range(_SETTLE_ROUNDS):
            try:
                return write()
            except HoldsDue:
                self.settle_overdue(program, account)
        try:
            return write()
        except HoldsDue:
            raise TooManyRetries(
                f"the wallet of {account} has holds past their deadline still being "
                "settled; retry with the same id"
            ) from None

    def expire(self, program: str, account: str, hold_id: str) -> HoldResult:
        """Expire a debit hold or release a held credit, once its deadline passed.

        The hold stays in the due index until its ``HoldExpired`` is raised (and the
        engine's listeners dismissed a ``LowBalance`` it topped up): a crash in
        between leaves it there, and the next job's call replays the settlement,
        whose replay listeners and this raising (under the hold's key: once) make
        up what was lost. A failing notification write also keeps it there."""
        hold = self.get(program, account, hold_id)
        op = "release" if hold.kind is HoldKind.CREDIT else "expire"
        try:
            result = self._settle(program, account, hold_id, op, None)
        except HoldNotActive as exc:
            return HoldResult(exc.hold, None)
        txn = result.transaction
        if txn is None:
            return result
        raised = True
        if op == "expire":
            raised = self.events.publish(
                LedgerEvent(
                    program,
                    account,
                    "HoldExpired",
                    {"hold_id": hold_id, "amount": hold.amount, "deadline": iso(hold.deadline)},
                    source_id=hold_id,
                    occurred_at=txn.created_at,
                )
            )
        if raised:
            # out of the index already (ConditionFailed), or a store error: then it
            # stays there, and the next job replays it (nothing more is raised)
            with contextlib.suppress(StoreError):
                self.store.transact_write(
                    [undue_settled_hold(hold_key(program, account, hold_id), result.hold.status)]
                )
        return result

    def _settle(
        self, program: str, account: str, hold_id: str, op: str, amount: int | None
    ) -> HoldResult:
        body = {"op": f"wallet.{op}", "hold": hold_id, "amount": amount}

        planned: list[Item] = []

        def plan(snap: Snapshot) -> Plan:
            key = hold_key(program, account, hold_id)
            # the head before the hold row: a settlement that commits between the two
            # reads shows in the row (not active any more); read the other way round,
            # the row is still active while the head no longer withholds it, and the
            # plan fails as a negative withheld amount instead of the hold's state
            acct = snap.account(account)
            stored = snap.store.get(key)
            if stored is None:
                raise NotFound(f"hold {hold_id} not found in program {program}")
            # another hold past its deadline is settled first (not by an expiry or a
            # release: the job settles them one by one)
            due = settled_hold_due(
                snap.store,
                program,
                acct,
                snap.now,
                settling=hold_id,
                refuse_due=op in ("capture", "void"),
            )
            p = settle_plan(snap, program, hold_from_item(stored), op, amount, renewed_due=due)
            finish = p.actions[0]
            assert isinstance(finish, Update)
            assert finish.key == key
            planned[:] = [apply_updates(stored, key, finish.updates)]
            return p

        def write() -> Transaction:
            return self.engine.commit(program, derived_id(hold_id, op), body, plan, lock=[account])

        txn = self.settling(program, account, write) if op in ("capture", "void") else write()
        if txn.replay or not planned:
            return HoldResult(self.get(program, account, hold_id), wallet_transaction(txn))
        return HoldResult(hold_from_item(planned[0]), wallet_transaction(txn))

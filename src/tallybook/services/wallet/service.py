"""The wallet (capability B): cash, store credit and expiring bonus grants per owner.

``ledger.wallet`` is the Python API; the HTTP router and the CLI call it.

- Bonus comes only from grants (:meth:`WalletService.grant`): a posting from
  ``@issuance`` (the program funds its bonuses) plus a grant row, in one
  transaction. Spending and expiry update grant rows in the same transaction
  as the posting, on condition of their current ``available``.
- The balance view counts unexpired grants only; :meth:`expire_grants` (a job)
  moves what is left of expired grants to ``@expiry``, once per grant.
- Debits spend bonus (earliest expiry first), then store credit, then cash, to
  ``@redemption``; a shortfall is rejected or charged (see ``debit``).
- Holds and held credits: see ``holds``; jobs: see ``jobs``. ``WalletService``
  binds their use cases (``authorize``, ``debit``, ``reconcile``...) as its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from tallybook.domain.ids import check_client_txn_id, check_flag, check_fund, check_id
from tallybook.domain.model import EXTERNAL, ISSUANCE, Leg, TxnType
from tallybook.domain.money import check_amount
from tallybook.domain.times import check_optional_time
from tallybook.domain.wallet import (
    BONUS,
    CREDIT_FUNDS,
    Grant,
    Hold,
    HoldStatus,
    WalletBalance,
    check_future,
    check_hold_id,
    fund_views,
)
from tallybook.errors import ConfigError, ValidationError
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.wallet.charges import ChargeProcessor, processor_from_env
from tallybook.services.wallet.debit import DebitOps
from tallybook.services.wallet.holds import HoldOps
from tallybook.services.wallet.jobs import WalletJobs
from tallybook.services.wallet.marks import (
    bonus_without_grants,
    holds_may_be_due,
    settled_hold_due,
    wallet_marks,
)
from tallybook.services.wallet.records import (
    WalletTransaction,
    availability_after,
    present_funds,
    wallet_transaction,
)
from tallybook.store.records.codec import iso
from tallybook.store.records.wallet import account_grants, grant_put, read_grants, read_holds

#: the longest a grant may be given to expire in, in days from now
MAX_GRANT_DAYS = 3660


@dataclass(frozen=True, slots=True)
class WalletTransactionPage:
    transactions: list[WalletTransaction]
    cursor: str | None


class WalletService:
    """``ledger.wallet``: cash, store credit and bonus grants per owner, debits across
    them, holds and held credits, reconcile (docs/wallet.md)."""

    def __init__(self, core: LedgerCore, processor: ChargeProcessor | None = None) -> None:
        self.core = core
        self.store = core.store
        self.engine = core.engine
        self.clock = core.clock
        self.processor = processor or processor_from_env()
        self._holds = HoldOps(core)
        self._debits = DebitOps(core, lambda: self.processor, self._holds)
        self._jobs = WalletJobs(core, self._holds, lambda: self.processor)
        # the use cases other modules implement are theirs, bound here, rather than
        # methods repeating their signatures: holds and held credits (holds.py),
        self.credit_held = self._holds.credit_held
        self.authorize = self._holds.authorize
        self.capture = self._holds.capture
        self.void = self._holds.void
        # debits that spend bonus, then store credit, then cash (debit.py),
        self.debit = self._debits.debit
        # and the jobs and the wallet invariant check (jobs.py)
        self.expire_grants = self._jobs.expire_grants
        self.expire_holds = self._jobs.expire_holds
        self.reconcile = self._jobs.reconcile
        self.check = self._jobs.check
        self.check_balances = self._jobs.check_balances
        self.charges_due = self._jobs.charges_due

    @property
    def processor(self) -> ChargeProcessor:
        """The charge hook; set it to plug in a real payment processor."""
        return self._processor

    @processor.setter
    def processor(self, processor: ChargeProcessor) -> None:
        # refused here: a charged debit would write its intent, then fail on it
        if not isinstance(processor, ChargeProcessor):
            raise ConfigError(
                "a charge processor has charge() and refund() "
                f"(see ChargeProcessor), not {type(processor).__name__}"
            )
        self._processor = processor

    # -- reads ----------------------------------------------------------------

    def balance(self, program: str, account: str) -> WalletBalance:
        """Per fund: total, withheld (pending) and available; overdue holds settle first.

        One read of the head when its marks (see ``wallet_marks``) show that no
        hold is due and that the unexpired grants hold the bonus balance."""
        prog = self.core.programs.get(program)
        acct = self.core.accounts.get(program, account)
        now = self.clock.now()
        if holds_may_be_due(acct, now) and self._settle_overdue(program, account):
            acct = self.core.accounts.get(program, account)
            now = self.clock.now()
        units = {f.name: f.unit for f in prog.funds}
        free = bonus_without_grants(acct, now) if BONUS in units else 0
        grants = read_grants(self.store, program, account, now) if free is None else None
        views = fund_views(acct.funds, units, grants, now)
        return WalletBalance(account, views, sum(v.available for v in views), now)

    def grants(self, program: str, account: str, *, include_expired: bool = False) -> list[Grant]:
        """Bonus grants, earliest expiry first (unexpired only unless asked)."""
        check_flag(include_expired, "include_expired")
        self.core.programs.get(program)  # an unknown program is named as such
        self.core.accounts.get(program, account)
        now = None if include_expired else self.clock.now()
        return read_grants(self.store, program, account, now)

    def hold(self, program: str, hold_id: str) -> Hold:
        """A hold by id; one past its deadline is expired (or released) on the way."""
        account = self._holds.account_of(program, hold_id)
        hold = self._holds.get(program, account, hold_id)
        if hold.overdue(self.clock.now()):
            hold = self._holds.expire(program, account, hold_id).hold
        return hold

    def holds(self, program: str, account: str, *, active_only: bool = False) -> list[Hold]:
        """An owner's holds and held credits (settled ones stay listed for 90 days)."""
        check_flag(active_only, "active_only")
        self.core.programs.get(program)
        self.core.accounts.get(program, account)
        self._settle_overdue(program, account)
        holds = read_holds(self.store, program, account)
        if active_only:
            holds = [h for h in holds if h.status is HoldStatus.ACTIVE]
        return sorted(holds, key=lambda h: h.created_at, reverse=True)

    def transaction(self, program: str, txn_id: str) -> WalletTransaction:
        """A transaction record with its per-fund breakdown and resulting availability."""
        return wallet_transaction(self.core.transactions.get(program, txn_id))

    def transactions(
        self, program: str, account: str, *, limit: int = 50, cursor: str | None = None
    ) -> WalletTransactionPage:
        """An owner's transaction records, newest first: its history entries merged with
        the owner index (authorisations and voids, which may show a moment late)."""
        page = self.core.transactions.for_owner(program, account, limit=limit, cursor=cursor)
        if not page.transactions and cursor is None:
            self.core.programs.get(program)
            self.core.accounts.get(program, account)  # an unknown owner is a 404, not []
        return WalletTransactionPage(
            [wallet_transaction(t) for t in page.transactions], page.cursor
        )

    # -- credits ----------------------------------------------------------------

    def grant(
        self,
        program: str,
        account: str,
        amount: int,
        *,
        expires_at: datetime | None = None,
        expires_in_days: int | None = None,
        txn_id: str,
        description: str | None = None,
    ) -> WalletTransaction:
        """Award a bonus grant expiring at ``expires_at``, or ``expires_in_days`` after it
        is granted (the grant id is ``txn_id``; a retry of either keeps the first answer)."""
        check_id(account, "account")
        amount = check_amount(amount)
        check_hold_id(txn_id, "a grant's txn_id (also its hold id)")
        if (expires_at is None) == (expires_in_days is None):
            raise ValidationError("give exactly one of expires_at or expires_in_days")
        expires_at = check_optional_time(expires_at, "expires_at")
        if expires_in_days is not None and (
            isinstance(expires_in_days, bool)
            or not isinstance(expires_in_days, int)
            or not 1 <= expires_in_days <= MAX_GRANT_DAYS
        ):
            raise ValidationError(f"expires_in_days must be an integer from 1 to {MAX_GRANT_DAYS}")
        body = {
            "op": "wallet.grant",
            "account": account,
            "amount": amount,
            # the request as given: a retry of "in 30 days" is the same request tomorrow
            **(
                {"expires_at": iso(expires_at)}
                if expires_at is not None
                else {"expires_in_days": expires_in_days}
            ),
            "description": description,
        }

        def plan(snap: Snapshot) -> Plan:
            if expires_at is not None:
                check_future(expires_at, snap.now, "expires_at")
            expires = expires_at or snap.now + timedelta(days=cast(int, expires_in_days))
            if snap.program.fund(BONUS) is None:
                raise ValidationError(f"program {program} has no bonus fund")
            acct = snap.account(account)
            due = settled_hold_due(snap.store, program, acct, snap.now)
            grant = Grant(txn_id, amount, amount, expires, snap.now)
            funds = present_funds(f.name for f in snap.program.funds)
            grants = account_grants(snap.store, program, acct, snap.now)
            marks = wallet_marks(
                acct, [*grants, grant], snap.now, balance_delta={BONUS: amount}, renewed_due=due
            )
            return Plan(
                type=TxnType.GRANT,
                legs=[Leg(account, BONUS, amount), Leg(ISSUANCE, BONUS, -amount)],
                attrs={account: marks},
                actions=[grant_put(program, account, grant)],
                description=description,
                owner=account,
                details={
                    "account": account,
                    "grants": [[txn_id, iso(expires), amount]],
                    "availability": availability_after(
                        acct, funds, grants, snap.now, bonus_delta=amount
                    ),
                },
            )

        txn = self._holds.settling(
            program,
            account,
            lambda: self.engine.commit(program, txn_id, body, plan, lock=[account]),
        )
        return wallet_transaction(txn)

    def credit(
        self,
        program: str,
        account: str,
        fund: str,
        amount: int,
        *,
        txn_id: str,
        description: str | None = None,
    ) -> WalletTransaction:
        """Money into cash or store credit from outside the program (``@external``)."""
        check_id(account, "account")
        check_client_txn_id(txn_id)
        check_fund(fund)
        amount = check_amount(amount)
        if fund not in CREDIT_FUNDS:
            raise ValidationError(f"wallet credits go to {' or '.join(CREDIT_FUNDS)}, not {fund}")
        body = {
            "op": "wallet.credit",
            "account": account,
            "fund": fund,
            "amount": amount,
            "description": description,
        }

        def plan(snap: Snapshot) -> Plan:
            acct = snap.account(account)
            due = settled_hold_due(snap.store, program, acct, snap.now)
            funds = present_funds(f.name for f in snap.program.funds)
            grants = account_grants(snap.store, program, acct, snap.now)
            return Plan(
                type=TxnType.CREDIT,
                legs=[Leg(account, fund, amount), Leg(EXTERNAL, fund, -amount)],
                attrs={account: wallet_marks(acct, grants, snap.now, renewed_due=due)},
                description=description,
                owner=account,
                details={
                    "account": account,
                    "availability": availability_after(
                        acct, funds, grants, snap.now, balance_delta={fund: amount}
                    ),
                },
            )

        txn = self._holds.settling(
            program,
            account,
            lambda: self.engine.commit(program, txn_id, body, plan, lock=[account]),
        )
        return wallet_transaction(txn)

    # -- helpers ----------------------------------------------------------------

    def _settle_overdue(self, program: str, account: str) -> bool:
        return self._holds.settle_overdue(program, account)

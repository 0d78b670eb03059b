"""Debits in spend order, and charging a shortfall to an external payment method.

Charging is three steps that cannot share one storage transaction, since the
processor is outside the store:

1. put a *charge intent* row ``C#{txn}`` (amount, status ``pending``), listed
   in the due index at ``now + CHARGE_GRACE``;
2. ask the processor to charge (idempotency key ``{program}:{txn}:{nonce}``, new per intent);
3. commit the debit, which deletes the intent on condition it is still
   ``pending``; the charge is recorded in that transaction as its own posting
   (``@external`` → ``@redemption``) and in ``details.charge``.

A decline deletes the intent; a timeout refunds the key, then deletes it. A
crash anywhere leaves either nothing, or an intent that ``reconcile`` finds
after the grace period: it marks it ``cancelling`` (so a late commit can no
longer use it), refunds the key and deletes it. A client that retries the same
debit before then reuses the intent and the processor's idempotent charge.
One charge is out of reach: one the processor carries out after reconcile
refunded its key (a call still in flight past the grace), when the process
that asked for it dies before refunding it itself; no row names its key any
more (docs/wallet.md, "What reconcile cannot find").
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Literal, cast

from tallybook.domain.ids import check_client_txn_id, check_id
from tallybook.domain.model import EXTERNAL, REDEMPTION, Leg, TxnType
from tallybook.domain.money import check_amount
from tallybook.domain.wallet import BONUS, CASH, Allocation, allocate
from tallybook.errors import (
    ConditionFailed,
    InsufficientFunds,
    LedgerError,
    PaymentDeclined,
    TooManyRetries,
    ValidationError,
)
from tallybook.retry import retrying
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.wallet.charges import ChargeDeclined, ChargeProcessor, ChargeTimeout
from tallybook.services.wallet.holds import HoldOps
from tallybook.services.wallet.marks import (
    holds_may_be_due,
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
from tallybook.store.port import Action, Value
from tallybook.store.records.codec import transaction_from_item
from tallybook.store.records.wallet import (
    CHARGE_CANCELLING,
    CHARGE_PENDING,
    ChargeIntent,
    account_grants,
    cancelling_charge,
    charge_put,
    drop_charge,
    drop_pending_charge,
    intent_key,
    read_charge,
    read_grants,
    spend_grant,
    takes_value,
)

log = logging.getLogger(__name__)

#: how long a charge may stay in flight before reconcile cancels it
CHARGE_GRACE = timedelta(minutes=10)

Shortfall = Literal["reject", "charge"]


def charge_key(program: str, txn_id: str, nonce: str) -> str:
    """The idempotency key at the processor of one charge intent of ``txn_id``.

    A processor charges a key at most once, and answers a refunded key's charge
    with the refunded charge; so an intent dropped after a refund (a refused
    commit, a timeout, reconcile) leaves its key behind, and the next intent of
    the same transaction id (a client's retry) charges under a key of its own.
    """
    return f"{program}:{txn_id}:{nonce}"


class DebitOps:
    def __init__(
        self, core: LedgerCore, processor: Callable[[], ChargeProcessor], holds: HoldOps
    ) -> None:
        self.core = core
        self.store = core.store
        self.engine = core.engine
        #: the wallet's current charge hook (it may be replaced after construction)
        self.processor = processor
        #: settles holds past their deadline when a debit would otherwise fall short
        self.holds = holds

    def debit(
        self,
        program: str,
        account: str,
        amount: int,
        *,
        txn_id: str,
        on_shortfall: Shortfall = "reject",
        order_id: str | None = None,
        description: str | None = None,
    ) -> WalletTransaction:
        """Spend ``amount`` from ``account``'s wallet: bonus (earliest expiry
        first), then store credit, then cash, in one transaction. A shortfall is
        refused (``on_shortfall="reject"``: :class:`InsufficientFunds`, final for
        ``txn_id``) or charged to the wallet's ``processor`` (``"charge"``;
        :class:`PaymentDeclined` when declined). ``txn_id`` again replays."""
        check_id(account, "account")
        amount = check_amount(amount)
        check_client_txn_id(txn_id)
        if on_shortfall not in ("reject", "charge"):
            raise ValidationError("on_shortfall must be 'reject' or 'charge'")
        body = {
            "op": "wallet.debit",
            "account": account,
            "amount": amount,
            "on_shortfall": on_shortfall,
            "order_id": order_id,
            "description": description,
        }
        if on_shortfall == "reject" or self.engine.existing(program, txn_id) is not None:
            return self._commit(program, account, amount, txn_id, body, 0, None)
        with retrying(self.engine.retry_policy) as tries:
            # at most 3 rounds, and their postings' retries, on one budget
            for _, _ in zip(range(3), tries, strict=False):
                shortfall = self._preview(program, account, amount).shortfall
                intent = self._intent(program, account, txn_id)
                if intent is None and shortfall == 0:
                    try:
                        return self._commit(program, account, amount, txn_id, body, 0, None)
                    except InsufficientFunds:
                        continue  # spent concurrently: charge the new shortfall
                return self._charge_and_commit(program, account, amount, txn_id, body, shortfall)
        # no refusal (which clients take as final): other spends kept outrunning this one
        raise TooManyRetries(f"the wallet of {account} kept changing; retry the debit")

    # -- steps ------------------------------------------------------------------

    def _preview(
        self, program: str, account: str, amount: int, *, settle: bool = True
    ) -> Allocation:
        prog = self.core.programs.get(program)
        acct = self.core.accounts.get(program, account)
        now = self.core.clock.now()
        funds = present_funds(f.name for f in prog.funds)
        grants = read_grants(self.store, program, account, now)
        alloc = allocate(amount, grants, {f: acct.fund(f).available for f in funds}, now)
        if settle and alloc.shortfall and holds_may_be_due(acct, now):
            # an overdue hold no longer withholds: settle it rather than charge for it
            self.holds.settle_overdue(program, account)
            return self._preview(program, account, amount, settle=False)
        return alloc

    def _intent(self, program: str, account: str, txn_id: str) -> ChargeIntent | None:
        return read_charge(self.store, intent_key(program, account, txn_id))

    def _charge_and_commit(
        self,
        program: str,
        account: str,
        amount: int,
        txn_id: str,
        body: dict[str, object],
        shortfall: int,
    ) -> WalletTransaction:
        prog = self.core.programs.get(program)
        if prog.fund(CASH) is None:
            raise ValidationError(f"program {program} has no cash fund to record a charge in")
        intent = self._intent(program, account, txn_id)
        if intent is None:
            now = self.core.clock.now()
            key = charge_key(program, txn_id, uuid.uuid4().hex[:16])
            intent = ChargeIntent(account, txn_id, shortfall, CHARGE_PENDING, now, key)
            try:
                self.store.transact_write([charge_put(program, intent, now + CHARGE_GRACE)])
            except ConditionFailed:
                intent = self._intent(program, account, txn_id) or intent
        if intent.status != CHARGE_PENDING:
            raise PaymentDeclined(being_refunded(txn_id, intent.amount))
        charged, key = intent.amount, intent.charge_key
        try:
            reference = self.processor().charge(
                key=key, account=account, amount=charged, currency=prog.currency
            )
        except ChargeDeclined as exc:
            self._drop_intent(program, account, txn_id, key)
            raise PaymentDeclined(f"the charge of {charged} was declined: {exc}") from None
        except Exception as exc:
            self._charge_failed(program, account, txn_id, intent, exc)
            # another attempt of this debit committed (with this charge, or with one
            # of its own while this one was refunded): the debit is applied
            return self._commit(program, account, amount, txn_id, body, 0, None)
        try:
            done = self._commit(program, account, amount, txn_id, body, charged, reference, key)
        except LedgerError as exc:
            unrefunded = self._give_up(program, account, txn_id, key, reference, charged)
            if unrefunded is None:
                raise
            refused = type(exc)(f"{exc.message}; {unrefunded}")
            refused.replay = exc.replay
            raise refused from exc
        if done.replay and (done.charge or {}).get("reference") != reference:
            # another attempt of this debit committed first, with a charge of its own:
            # the debit is applied, whatever becomes of this charge's refund
            self._give_up(program, account, txn_id, key, reference, charged)
        return done

    def _charge_failed(
        self, program: str, account: str, txn_id: str, intent: ChargeIntent, exc: Exception
    ) -> None:
        """After a timeout, or anything else a processor raises (docs/wallet.md): the
        charge may have happened, so its key is refunded (when that fails too, the
        intent stays and reconcile refunds it once its grace is over). Returns when
        another attempt of the debit committed; else raises ``PaymentDeclined``."""
        charged, key = intent.amount, intent.charge_key
        what = "timed out" if isinstance(exc, ChargeTimeout) else f"failed ({type(exc).__name__})"
        try:
            unrefunded = self._give_up(program, account, txn_id, key, None, charged)
            if self.engine.existing(program, txn_id) is not None:
                return
        except Exception:  # the store failed: the intent stays for reconcile
            unrefunded = left_for_reconcile(charged)
        if unrefunded is not None:
            raise PaymentDeclined(
                f"the charge of {charged} {what}; nothing was debited, and {unrefunded}"
            ) from exc
        raise PaymentDeclined(
            f"the charge of {charged} {what} and was reversed; nothing was debited"
        ) from (None if isinstance(exc, ChargeTimeout) else exc)

    def _give_up(
        self,
        program: str,
        account: str,
        txn_id: str,
        key: str,
        reference: str | None,
        amount: int,
    ) -> str | None:
        """Refund the charge made under ``key``, unless the debit committed with it.

        The intent of ``key`` is taken first (``cancelling``, as reconcile takes it), so
        no attempt sharing the key can commit it meanwhile, then refunded and removed.
        With no intent of ``key`` left (a commit took it, or reconcile, whose refund may
        have reached the processor before this charge did), the key is refunded unless
        the committed debit records its charge: its key is ``key`` (a debit committed
        before charges recorded their key: its reference is ``reference``, or
        ``reference`` is None, a timeout, which leaves such a charge alone).

        None when the charge was refunded or is the debit's; else what became of a
        refund the processor failed (whatever it raised): the intent of ``key`` stays,
        taken for refunding, so ``reconcile`` refunds it (one is put back when none
        was left and the slot is free)."""
        at = intent_key(program, account, txn_id)
        try:
            self.store.transact_write([cancelling_charge(at, key)])
        except ConditionFailed:
            if self._records_charge(program, txn_id, key, reference) or self._refunded(key):
                return None
            return self._leave_for_reconcile(program, account, txn_id, key, amount)
        if not self._refunded(key):
            return left_for_reconcile(amount)
        with contextlib.suppress(ConditionFailed):
            self.store.transact_write([drop_charge(at, key)])
        return None

    def _refunded(self, key: str) -> bool:
        """Refund ``key``; False when the processor raised (logged), as an
        undocumented error must not replace the debit's own answer."""
        try:
            self.processor().refund(key=key)
        except Exception:
            log.exception("the refund of charge key %s failed; reconcile retries it", key)
            return False
        return True

    def _leave_for_reconcile(
        self, program: str, account: str, txn_id: str, key: str, amount: int
    ) -> str:
        """Put back an intent of ``key``, taken for refunding, for ``reconcile``."""
        now = self.core.clock.now()
        intent = ChargeIntent(account, txn_id, amount, CHARGE_CANCELLING, now, key)
        try:
            self.store.transact_write([charge_put(program, intent, now + CHARGE_GRACE)])
        except ConditionFailed:
            # another attempt's intent holds the slot: nothing in the store names key now
            log.error("charge key %s of %s: refund failed, left for the processor", key, txn_id)
            return (
                f"the charge of {amount} (processor key {key}) could not be refunded, nor "
                "left for reconcile: refund it at the processor"
            )
        return left_for_reconcile(amount)

    def _records_charge(self, program: str, txn_id: str, key: str, reference: str | None) -> bool:
        """Whether the committed debit ``txn_id`` records the charge made under ``key``."""
        committed = self.engine.existing(program, txn_id)
        if committed is None:
            return False
        recorded = transaction_from_item(committed).details.get("charge")
        if not isinstance(recorded, dict):
            return False
        if recorded.get("key") is not None:
            return bool(recorded["key"] == key)
        # recorded before debits kept their charge's key: go by the reference
        return recorded.get("reference") is not None and reference in (
            None,
            recorded["reference"],
        )

    def _drop_intent(self, program: str, account: str, txn_id: str, key: str) -> None:
        # gone already, or reconcile is cancelling it: either way not ours to delete
        with contextlib.suppress(ConditionFailed):
            at = intent_key(program, account, txn_id)
            self.store.transact_write([drop_pending_charge(at, key)])

    def _commit(
        self,
        program: str,
        account: str,
        amount: int,
        txn_id: str,
        body: dict[str, object],
        charged: int,
        reference: str | None,
        key: str | None = None,
    ) -> WalletTransaction:
        def plan(snap: Snapshot) -> Plan:
            acct = snap.account(account)
            due = settled_hold_due(snap.store, program, acct, snap.now)
            funds = present_funds(f.name for f in snap.program.funds)
            grants = account_grants(snap.store, program, acct, snap.now)
            by_id = {g.id: g for g in grants}
            alloc = allocate(
                amount - charged, grants, {f: acct.fund(f).available for f in funds}, snap.now
            )
            if alloc.shortfall:
                raise InsufficientFunds(
                    f"insufficient funds in the wallet of {account}: available "
                    f"{alloc.covered + charged}, needed {amount}"
                )
            actions: list[Action] = [
                spend_grant(program, account, by_id[t.grant_id], t) for t in alloc.grants
            ]
            redeemed: dict[str, int] = defaultdict(int)
            legs = []
            for fund, x in alloc.funds.items():
                legs.append(Leg(account, fund, -x))
                redeemed[fund] += x
            details: dict[str, Value] = {
                "account": account,
                "grants": takes_value(alloc.grants, -1),
                "availability": availability_after(
                    acct,
                    funds,
                    grants,
                    snap.now,
                    balance_delta={f: -x for f, x in alloc.funds.items()},
                    bonus_delta=-alloc.funds.get(BONUS, 0),
                ),
            }
            if charged:
                at = intent_key(program, account, txn_id)
                intent = read_charge(snap.store, at)
                # the intent of this attempt's charge: another attempt's (after
                # reconcile cancelled this one's) records a charge of its own
                if intent is None or intent.status != CHARGE_PENDING or intent.charge_key != key:
                    raise PaymentDeclined(
                        f"the charge for transaction {txn_id} was cancelled before it could "
                        "be committed (by reconcile, or by another attempt of this debit "
                        "that gave up on it); nothing was debited: retry the debit"
                    )
                legs.append(Leg(EXTERNAL, CASH, -charged))
                redeemed[CASH] += charged
                actions.append(drop_pending_charge(at, key))
                # its key too: an attempt that timed out tells its own charge from another's
                details["charge"] = {"amount": charged, "reference": reference, "key": key}
            legs += [Leg(REDEMPTION, f, x) for f, x in redeemed.items()]
            marks = wallet_marks(
                acct,
                with_takes(grants, alloc.grants, -1),
                snap.now,
                balance_delta={f: -x for f, x in alloc.funds.items()},
                renewed_due=due,
            )
            return Plan(
                type=TxnType.DEBIT,
                legs=legs,
                attrs={account: marks},
                actions=actions,
                owner=account,
                order_id=order_id_of(body),
                description=description_of(body),
                details=details,
            )

        # a charged debit retries its own id after a concurrent spend: its refusals are not final
        final = body.get("on_shortfall") == "reject"
        txn = self.holds.settling(
            program,
            account,
            lambda: self.engine.commit(
                program, txn_id, body, plan, lock=[account], keep_refusal=final
            ),
        )
        return wallet_transaction(txn)


def being_refunded(txn_id: str, amount: int) -> str:
    """Why a debit is refused while an earlier charge of its id is being refunded:
    its intent was taken for refunding (by reconcile, or by an attempt that gave up
    on it) and is still there, as when the processor failed the refund."""
    return (
        f"an earlier charge of {amount} for transaction {txn_id} is being refunded "
        "(reconcile refunds it if it has not been yet); retry the debit with a new "
        "transaction id, or with this one once reconcile has refunded it"
    )


def left_for_reconcile(amount: int) -> str:
    """What a debit adds to its answer of a charge whose refund failed: its intent
    stays, taken for refunding, for reconcile."""
    grace = f"{CHARGE_GRACE.total_seconds() / 60:.0f} min"
    return (
        f"the charge of {amount} could not be refunded yet: reconcile refunds it once "
        f"its {grace} grace is over"
    )


def order_id_of(body: dict[str, object]) -> str | None:
    return cast(str | None, body.get("order_id"))


def description_of(body: dict[str, object]) -> str | None:
    return cast(str | None, body.get("description"))

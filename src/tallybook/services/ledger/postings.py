"""The posting engine: one place where a ledger transaction begins and ends.

A use case describes its transaction with a *planner*: a function that looks
at current state through a :class:`Snapshot` and returns a :class:`Plan`
(legs, holds, extra storage actions). :meth:`PostingEngine.commit` turns the
plan into one storage transaction:

1. ``Put`` the transaction record, on condition it does not exist (the
   idempotency record: a replay fails here and returns the original);
2. ``Update`` each customer account's head (balances, holds, sequence
   numbers) on condition its version is unchanged (optimistic concurrency);
   one of them also adds the transaction's system legs to its system
   counters, so no system-account item is written per posting;
3. ``Put`` one history entry per customer leg, carrying the resulting balance;
4. the plan's own actions (hold items, lots, ...).

How each item is laid out is :mod:`tallybook.store.records.ledger`'s business.

A version conflict retries the whole plan with backoff and jitter, bounded by
the operation's retry budget (:mod:`tallybook.retry`), which the engine's own
retries share.
Writers of the same account in one process queue on a lock first, so a hot
account does not collapse into retries.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tallybook.domain.event_types import (
    EVENT_TYPES,
    event_accounts,
    event_id,
    transaction_event_types,
)
from tallybook.domain.ids import check_id, is_system_account
from tallybook.domain.model import (
    EXPIRY,
    ISSUANCE,
    REDEMPTION,
    Account,
    FundState,
    Leg,
    Program,
    Transaction,
)
from tallybook.domain.postings import (
    FundChange,
    apply_change,
    check_description,
    check_legs,
    check_metadata,
    fingerprint,
    posted_leg,
)
from tallybook.errors import (
    ConditionFailed,
    IdempotencyConflict,
    LedgerError,
    NotFound,
    TooManyRetries,
    TransactionConflict,
    ValidationError,
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.services.clock import Clock
from tallybook.services.ledger.programs import ProgramService
from tallybook.services.ledger.refusals import (
    is_final,
    is_refusal,
    refusal_error,
    refusal_item,
    store_refusal,
)
from tallybook.store.port import (
    MAX_TRANSACTION_ACTIONS,
    Action,
    Item,
    ItemStore,
    Value,
)
from tallybook.store.records import ledger as records
from tallybook.store.records.codec import (
    account_from_item,
    iso,
    to_us,
    transaction_from_item,
)
from tallybook.store.records.reports import reward_index_fields

_LOCK_STRIPES = 256


@dataclass
class Plan:
    """What a use case wants one transaction to do."""

    type: str
    legs: list[Leg] = field(default_factory=list)
    #: (account, fund) -> change of the amount held (authorisations)
    held: dict[tuple[str, str], int] = field(default_factory=dict)
    #: account -> attributes merged into the head's ``attrs`` map (tier, ...)
    attrs: dict[str, dict[str, Value]] = field(default_factory=dict)
    #: extra head attributes set at top level (index keys such as gsi1pk)
    head_sets: dict[str, dict[str, Value]] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    details: dict[str, Value] = field(default_factory=dict)
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    allow_empty: bool = False
    #: index the record by order id (off where the id already derives from the
    #: order, as a loyalty earn's does: the order is found by key, no index write)
    index_order: bool = True
    #: (account, fund) -> extra attributes of that leg's history entry (a
    #: loyalty lot rides on its earn's entry instead of being an item of its own)
    entry_fields: dict[tuple[str, str], dict[str, Value]] = field(default_factory=dict)


class Snapshot:
    """Current state as a planner sees it; remembers account versions it read."""

    def __init__(self, store: ItemStore, program: Program, now: datetime) -> None:
        self.store = store
        self.program = program
        self.now = now
        self.accounts: dict[str, Account] = {}

    def account(self, account_id: str) -> Account:
        if account_id not in self.accounts:
            item = self.store.get(records.head_key(self.program.id, account_id))
            if item is None:
                raise NotFound(f"account {account_id} not found in program {self.program.id}")
            self.accounts[account_id] = account_from_item(item)
        return self.accounts[account_id]

    def preload(self, account_ids: Sequence[str]) -> None:
        """Read several heads in one batch request."""
        missing = [a for a in dict.fromkeys(account_ids) if a not in self.accounts]
        if len(missing) == 1:
            self.account(missing[0])
            return
        if not missing:
            return
        found = self.store.batch_get([records.head_key(self.program.id, a) for a in missing])
        for item in found:
            acct = account_from_item(item)
            self.accounts[acct.id] = acct
        for a in missing:
            if a not in self.accounts:
                raise NotFound(f"account {a} not found in program {self.program.id}")


Planner = Callable[[Snapshot], Plan]
Listener = Callable[["Committed"], None]
ReplayListener = Callable[["Replayed"], None]
#: adds a capability's own writes to another's plan, in the same transaction
#: (loyalty keeps a member's tier when a plain credit moves their points)
Amender = Callable[[Snapshot, Plan, str], None]


@dataclass(frozen=True, slots=True)
class Committed:
    """Published after a transaction is applied: before and after of each account."""

    program: Program
    transaction: Transaction
    before: Mapping[str, Account]
    after: Mapping[str, dict[str, FundState]]


@dataclass(frozen=True, slots=True)
class Replayed:
    """Published when a transaction id is replayed (the original was applied, by this
    request's first attempt or another's): the record, and per account the change
    number it took (``chg``), so a listener can tell whether the account changed
    since. What a listener of :class:`Committed` missed (a crash after the commit)
    is raised again from here, never from a refusal or a conflict."""

    program: Program
    transaction: Transaction
    numbers: Mapping[str, int]


class PostingEngine:
    def __init__(
        self,
        store: ItemStore,
        programs: ProgramService,
        clock: Clock,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.store = store
        self.programs = programs
        self.clock = clock
        self.retry_policy = retry_policy or RetryPolicy()
        self.listeners: list[Listener] = []
        self.replay_listeners: list[ReplayListener] = []
        self.amenders: list[Amender] = []
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self.retries = 0

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def subscribe_replays(self, listener: ReplayListener) -> None:
        """``listener`` runs after each replay of an applied transaction (not on the
        fresh path: a fresh commit reads and writes nothing more for it)."""
        self.replay_listeners.append(listener)

    def amend(self, amender: Amender) -> None:
        """Run ``amender`` on every plan before it is written (same transaction)."""
        self.amenders.append(amender)

    def existing(self, program_id: str, txn_id: str) -> Item | None:
        return records.read_transaction(self.store, program_id, txn_id)

    def commit(
        self,
        program_id: str,
        txn_id: str,
        body: Mapping[str, Any],
        planner: Planner,
        *,
        lock: Sequence[str] = (),
        keep_refusal: bool = True,
    ) -> Transaction:
        """Apply ``planner``'s plan exactly once for ``txn_id``; replays return the original.

        An insufficient-funds refusal is stored under ``txn_id`` and given again
        to every retry (:mod:`tallybook.services.ledger.refusals`), unless ``keep_refusal``
        is off (a caller that retries the same id itself, as a charged debit does).
        """
        check_id(txn_id, "transaction id")
        program = self.programs.get(program_id)
        fp = fingerprint(body)
        stripes = sorted({zlib.crc32(f"{program_id}#{a}".encode()) % _LOCK_STRIPES for a in lock})
        for s in stripes:
            self._stripes[s].acquire()
        try:
            return self._commit(program, txn_id, fp, planner, keep_refusal)
        finally:
            for s in reversed(stripes):
                self._stripes[s].release()

    def _commit(
        self, program: Program, txn_id: str, fp: str, planner: Planner, keep_refusal: bool
    ) -> Transaction:
        committed: Committed | None = None
        with retrying(self.retry_policy) as tries:
            for attempt in tries:
                if attempt:
                    self.retries += 1
                snap = Snapshot(self.store, program, self.clock.now())
                try:
                    plan = planner(snap)
                    for amender in self.amenders:
                        amender(snap, plan, txn_id)
                    actions, record, after = self._build(program, txn_id, fp, plan, snap)
                except LedgerError as exc:
                    existing = self.existing(program.id, txn_id)
                    if existing is None and keep_refusal and is_final(exc):
                        existing = self._refuse(program.id, txn_id, fp, exc, snap.now)
                    if existing is not None:
                        return self._replayed(program, existing, fp)
                    raise
                try:
                    self.store.transact_write(actions)
                except ConditionFailed as exc:
                    if exc.index == 0:
                        existing = self.existing(program.id, txn_id)
                        if existing is not None:
                            return self._replayed(program, existing, fp)
                    continue
                except TransactionConflict:
                    continue
                committed = Committed(program, record, dict(snap.accounts), after)
                break
        if committed is None:
            raise TooManyRetries(
                f"transaction {txn_id} kept conflicting with concurrent writers; retry it"
            )
        # outside the retry budget: a listener's own writes are operations of their own
        for listener in self.listeners:
            listener(committed)
        return committed.transaction

    def _refuse(
        self, program_id: str, txn_id: str, fp: str, exc: LedgerError, now: datetime
    ) -> Item | None:
        """Store the refusal; None when stored, else what a concurrent request stored first."""
        key = records.transaction_key(program_id, txn_id)
        if store_refusal(self.store, key, refusal_item(program_id, txn_id, fp, exc, iso(now))):
            return None
        return self.existing(program_id, txn_id)

    def recover(self, program_id: str, txn_id: str) -> Transaction | None:
        """The applied transaction ``txn_id`` as a replay, its replay listeners run
        (a job re-run after a crash raises what the first run's commit did not);
        ``None`` if it was never applied (no record, or a refusal)."""
        item = self.existing(program_id, txn_id)
        if item is None or is_refusal(item):
            return None
        fp = records.fingerprint_of(item)
        return self._replayed(self.programs.get(program_id), item, str(fp))

    @staticmethod
    def last_change_was(account: Account, txn_id: str) -> bool:
        """Whether ``txn_id`` took ``account``'s last change number: nothing numbered
        (a posting, a hold, a notification of the account) happened since. From the
        head alone: no read."""
        if account.last_change is None:
            return False
        key = records.transaction_key(account.program, txn_id)
        return any(account.last_change == event_id(key.pk, key.sk, t) for t in EVENT_TYPES)

    def _replayed(self, program: Program, item: Item, fp: str) -> Transaction:
        """The replay of ``item``; its replay listeners run (a refusal raises first)."""
        txn = self._replay(item, fp)
        if self.replay_listeners:
            replayed = Replayed(program, txn, records.change_numbers(item))
            for listener in self.replay_listeners:
                listener(replayed)
        return txn

    @staticmethod
    def _replay(item: Item, fp: str) -> Transaction:
        if item.get("fingerprint") != fp:
            raise IdempotencyConflict(
                f"transaction id {item.get('txn_id')} was used before with a different request"
            )
        if is_refusal(item):
            raise refusal_error(item)
        return transaction_from_item(item, replay=True)

    def _build(
        self, program: Program, txn_id: str, fp: str, plan: Plan, snap: Snapshot
    ) -> tuple[list[Action], Transaction, dict[str, dict[str, FundState]]]:
        check_legs(program, plan.legs, allow_empty=plan.allow_empty or bool(plan.held))
        metadata = check_metadata(plan.metadata)
        description = check_description(plan.description)
        if plan.order_id is not None:
            check_id(plan.order_id, "order id")
        now = snap.now
        # which legs are customers' is asked once; the system legs only add to counters
        customer = [leg for leg in plan.legs if not is_system_account(leg.account)]

        changes: dict[tuple[str, str], FundChange] = {
            (leg.account, leg.fund): FundChange(amount=leg.amount) for leg in customer
        }
        for (account, fund), delta in plan.held.items():
            prev = changes.get((account, fund), FundChange())
            changes[(account, fund)] = FundChange(prev.amount, prev.held_delta + delta)
        touched = list(dict.fromkeys([a for a, _ in changes] + list(plan.attrs)))
        touched += [a for a in plan.head_sets if a not in touched]
        owner = plan.owner or (
            customer[0].account if customer else (touched[0] if touched else None)
        )
        # the accounts the transaction's events concern take their next change
        # number (gap-free per account: the fan-out orders their events by it)
        numbered: tuple[str, ...] = ()
        event_types = transaction_event_types(plan.type, bool(plan.legs), plan.details)
        if event_types:
            numbered = event_accounts([leg.account for leg in customer], plan.details, owner)
            touched += [a for a in numbered if a not in touched]
        snap.preload(touched)

        now_us = to_us(now)
        new_states: dict[str, dict[str, FundState]] = {}
        for (account, fund), change in changes.items():
            acct = snap.account(account)
            funds = new_states.setdefault(account, dict(acct.funds))
            funds[fund] = apply_change(program, account, fund, acct.fund(fund), change, now_us)

        posted = tuple(
            posted_leg(
                program,
                leg,
                None if is_system_account(leg.account) else new_states[leg.account][leg.fund],
            )
            for leg in plan.legs
        )
        record = Transaction(
            program=program.id,
            id=txn_id,
            type=str(plan.type),  # a plain str, as when read back (not a TxnType)
            legs=posted,
            created_at=now,
            order_id=plan.order_id,
            description=description,
            metadata=metadata,
            details=dict(plan.details),
        )
        numbering: records.Changes | None = None
        numbers: dict[str, Value] = {}
        if numbered:
            key = records.transaction_key(program.id, txn_id)
            numbering = records.Changes((event_id(key.pk, key.sk, event_types[0]),), now_us)
            numbers = {a: numbering.numbers(snap.account(a))[0] for a in numbered}
        system = _system_amounts(plan.legs)
        carrier = owner if owner in touched else (touched[0] if touched else None)
        owner_has_entry = any(leg.account == owner for leg in customer)
        actions: list[Action] = [
            records.transaction_put(
                record,
                fingerprint=fp,
                owner=owner,
                index_owner=not owner_has_entry,
                index_order=plan.index_order,
                numbers=numbers,
            )
        ]
        for account in touched:
            actions.append(
                records.head_update(
                    program.id,
                    snap.account(account),
                    funds=new_states.get(account),
                    attrs=plan.attrs.get(account),
                    sets=plan.head_sets.get(account),
                    system=system if account == carrier else None,
                    changes=numbering if account in numbered else None,
                )
            )
        if carrier is None:
            per_account: dict[str, dict[str, int]] = {}
            for (system_account, fund), amount in system.items():
                per_account.setdefault(system_account, {})[fund] = amount
            for system_account, amounts in per_account.items():
                actions.append(
                    records.system_shard_update(program.id, system_account, txn_id, amounts)
                )
        counters = _reward_counters(plan.legs)
        now_iso = iso(now) if counters else ""
        for leg, p in zip(plan.legs, posted, strict=True):
            if p.balance is None:  # a system leg: no entry
                continue
            fields = plan.entry_fields.get((leg.account, leg.fund))
            shares = counters.get(leg.fund)
            if shares is not None:
                index = reward_index_fields(
                    program.id, shares, txn_id, leg.account, leg.fund, now_iso
                )
                fields = index if fields is None else {**index, **fields}
            state = new_states[leg.account][leg.fund]
            actions.append(
                records.entry_put(record, leg.account, leg.fund, p.unit, leg.amount, state, fields)
            )

        actions.extend(plan.actions)
        if len(actions) > MAX_TRANSACTION_ACTIONS:
            raise ValidationError(
                f"the transaction touches {len(actions)} items; a store takes "
                f"{MAX_TRANSACTION_ACTIONS} in one transaction"
            )
        return actions, record, new_states


_REWARD_COUNTERS = frozenset((ISSUANCE, REDEMPTION, EXPIRY))


def _system_amounts(legs: Sequence[Leg]) -> dict[tuple[str, str], int]:
    """(system account, fund) -> the amount a transaction moves on it."""
    out: dict[tuple[str, str], int] = {}
    for leg in legs:
        if is_system_account(leg.account):
            out[(leg.account, leg.fund)] = out.get((leg.account, leg.fund), 0) + leg.amount
    return out


def _reward_counters(legs: Sequence[Leg]) -> dict[str, dict[str, int]]:
    """fund -> the reward counters (issuance, redemption or expiry) a transaction
    posts that fund against, each with the customer's share of it. A customer
    entry in such a fund carries index attributes: the rewards-issued report
    reads them per hour on gsi1 (no extra item, no scan; see docs/billing.md).

    A fund posted against one counter indexes every customer entry in it. A fund
    posted against several (a wallet capture that also sends released bonus of
    an expired grant to ``@expiry``) indexes its one customer entry with the
    share of each counter; with several customer entries in such a fund no
    entry's share of each counter is known, and it is left out of the index."""
    found: dict[str, dict[str, int]] = {}
    for leg in legs:
        if leg.account in _REWARD_COUNTERS:
            shares = found.setdefault(leg.fund, {})
            # the customer's side of the counter's leg
            shares[leg.account] = shares.get(leg.account, 0) - leg.amount
    for fund, shares in list(found.items()):
        if len(shares) > 1:
            entries = [leg for leg in legs if leg.fund == fund]
            if sum(not is_system_account(leg.account) for leg in entries) != 1:
                del found[fund]
    return found

"""Notifications the ledger raises by itself.

- From the posting engine: ``LowBalance`` when a fund's *available* amount
  (balance minus holds) drops below its ``FundSpec.low_balance_threshold``;
  dismissed (reason ``topped_up``, by the transaction id) once it is back at
  or above it. A fund that never was above its threshold raises nothing.
- From the event bus: every :class:`LedgerEvent` (``HoldExpired`` from the
  wallet, ``TierChanged`` and ``PointsExpiring`` from loyalty...) becomes a
  notification of its type; its ``source_id`` makes re-raising a no-op.

A failing trigger is logged and never undoes the committed write. What a crash
between the commit and the trigger lost is raised when the client retries the
transaction id (:func:`low_balance_replayed`): the replay reads the account's
head and raises (key ``lb:{txn}:{fund}``, so once) only if the transaction is
still the account's last numbered change and crossed the threshold, and
dismisses an active LowBalance about a fund the transaction topped up that is
at or above its threshold now.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.domain.model import FundState, Program, Transaction
from tallybook.domain.notifications import (
    LOW_BALANCE,
    DismissReason,
    Notification,
    check_payload,
    check_type,
    parse_rules,
    threshold_crossing,
)
from tallybook.errors import IdempotencyConflict, TallybookError
from tallybook.services.events import EventBus, LedgerEvent
from tallybook.services.ledger.postings import Committed, PostingEngine, Replayed
from tallybook.store.records import notifications as items
from tallybook.store.records.accounts import account_ids

if TYPE_CHECKING:
    from tallybook.services.notifications.service import NotificationService

log = logging.getLogger("tallybook.notifications")


def attach(service: NotificationService, *, engine: PostingEngine, events: EventBus) -> None:
    """Subscribe ``service`` to the engine's commits and to the event bus (the
    composition root, ``tallybook.Ledger``, does this once per ledger)."""

    def on_committed(event: Committed) -> None:
        try:
            low_balance(service, event)
        except TallybookError as exc:  # the store's answer: one line, no traceback
            log.warning(
                "low-balance notification of %s not written (%s: %s); "
                "retrying the transaction raises it",
                event.transaction.id,
                type(exc).__name__,
                exc,
            )
        except Exception:
            log.exception("low-balance notification failed for %s", event.transaction.id)

    def on_replayed(event: Replayed) -> None:
        try:
            low_balance_replayed(service, event)
        except TallybookError as exc:
            log.warning(
                "low-balance recovery of %s not written (%s: %s); retry the transaction again",
                event.transaction.id,
                type(exc).__name__,
                exc,
            )
        except Exception:
            log.exception("low-balance recovery failed for %s", event.transaction.id)

    def on_event(event: LedgerEvent) -> None:
        ledger_event(service, event)

    def on_threshold(program: Program, fund: str) -> None:
        threshold_changed(service, program, fund)

    engine.subscribe(on_committed)
    engine.subscribe_replays(on_replayed)
    events.subscribe(on_event)
    service.programs.on_threshold_change(on_threshold)


def low_balance(service: NotificationService, event: Committed) -> None:
    for account, funds in event.after.items():
        before = event.before.get(account)
        if before is None:
            continue
        for fund, state in funds.items():
            spec = event.program.fund(fund)
            threshold = spec.low_balance_threshold if spec else None
            if threshold is None:
                continue
            crossing = threshold_crossing(before.fund(fund).available, state.available, threshold)
            if crossing is True:
                _raise(service, event.program, account, fund, state, threshold, event.transaction)
            elif crossing is False:
                _dismiss(service, event.program.id, account, fund, event.transaction.id)


def low_balance_replayed(service: NotificationService, event: Replayed) -> None:
    """Raise or dismiss what the first commit of a replayed transaction should have,
    if that was lost (a crash after the commit) and is still true now.

    - raised: the transaction lowered the fund's available amount, it is still
      the account's last numbered change (its ``chg`` number is the head's: no
      posting, hold or notification of the account since, so the head is the
      state it left) and it crossed the threshold; the key
      ``lb:{txn}:{fund}`` makes it once (a raise that was not lost also took a
      change number, so it is not even tried);
    - dismissed: the transaction raised the fund's available amount, which is
      at or above the threshold now, and a LowBalance about the fund is active.

    Nothing is read unless the transaction moved a fund with a threshold."""
    program, txn = event.program, event.transaction
    moved: dict[str, dict[str, tuple[int, int]]] = {}
    for (account, fund), delta in available_deltas(txn).items():
        spec = program.fund(fund)
        if delta and spec is not None and spec.low_balance_threshold is not None:
            moved.setdefault(account, {})[fund] = (delta, spec.low_balance_threshold)
    for account, deltas in moved.items():
        head = service.accounts.get(program.id, account)
        unchanged = event.numbers.get(account) == head.changes
        for fund, (delta, threshold) in deltas.items():
            state = head.fund(fund)
            if delta > 0 and state.available >= threshold:
                _dismiss(service, program.id, account, fund, txn.id)
            elif (
                delta < 0
                and unchanged
                and threshold_crossing(state.available - delta, state.available, threshold)
            ):
                _raise(service, program, account, fund, state, threshold, txn)


def threshold_changed(service: NotificationService, program: Program, fund: str) -> int:
    """Dismiss each active LowBalance about ``fund`` that the fund's new threshold
    makes untrue: all of them when it was cleared, else those of accounts whose
    available amount is at or above it now (reason ``threshold_changed``, by
    ``threshold``). One that is still below stays, with the payload it was
    raised with. How many were dismissed.

    Reads the program's account directory, the accounts' active LowBalance rows
    (one batch per 100 accounts) and the head of each account that has one about
    the fund: a job's cost, paid once per change of a threshold."""
    spec = program.fund(fund)
    threshold = spec.low_balance_threshold if spec else None
    dismissed = 0
    ids = account_ids(service.store, program.id)
    while batch := list(itertools.islice(ids, _BATCH)):
        now = service.clock.now()
        for row in items.read_active_of(service.store, program.id, batch, LOW_BALANCE):
            n = items.from_item(row, now)
            if not items.live(row, now) or n.payload.get("fund") != fund:
                continue
            if threshold is not None:
                head = service.accounts.get(program.id, n.account)
                if head.fund(fund).available < threshold:
                    continue
            done = service.dismiss_from(
                program.id,
                n.account,
                LOW_BALANCE,
                "threshold",
                DismissReason.THRESHOLD_CHANGED,
                _is(n.id),
            )
            dismissed += done is not None
    return dismissed


#: accounts whose active LowBalance rows one batch read asks for
_BATCH = 100


def available_deltas(txn: Transaction) -> dict[tuple[str, str], int]:
    """(account, fund) -> how much a transaction changed the available amount: its
    customer legs, minus what it held (``details.held`` of ``details.account``:
    an authorisation holds, a settlement releases)."""
    out: dict[tuple[str, str], int] = {}
    for leg in txn.legs:
        if leg.balance is not None:  # a customer leg (a system leg has no balance)
            out[(leg.account, leg.fund)] = out.get((leg.account, leg.fund), 0) + leg.amount
    held = txn.details.get("held")
    account = txn.details.get("account")
    if isinstance(held, dict) and isinstance(account, str):
        for fund, amount in held.items():
            if isinstance(amount, int):
                out[(account, fund)] = out.get((account, fund), 0) - amount
    return out


def _raise(
    service: NotificationService,
    program: Program,
    account: str,
    fund: str,
    state: FundState,
    threshold: int,
    txn: Transaction,
) -> None:
    payload = {
        "fund": fund,
        "balance": state.balance,
        "available": state.available,
        "threshold": threshold,
        "txn_id": txn.id,
    }
    service.add_to(program, account, LOW_BALANCE, payload, f"lb:{txn.id}:{fund}", None)


def _dismiss(service: NotificationService, program: str, account: str, fund: str, by: str) -> None:
    service.dismiss_from(program, account, LOW_BALANCE, by, DismissReason.TOPPED_UP, _about(fund))


def ledger_event(service: NotificationService, event: LedgerEvent) -> None:
    program = service.programs.get(event.program)
    if event.occurred_at is not None:
        rules = parse_rules(program.settings.get("notifications"), stored=True)
        retention = rules.retention_days
        if event.occurred_at + timedelta(days=retention) <= service.clock.now():
            return  # its key (and any notification it raised) is past retention
    expires_at = event.expires_at
    if expires_at is not None and items.epoch(expires_at) <= items.epoch(service.clock.now()):
        return  # what it tells is no longer true (the store would not list it)
    key = event_key(event.type, event.source_id) if event.source_id else None
    payload = check_payload(dict(event.payload))
    type_ = check_type(event.type)
    try:
        service.add_to(program, event.account, type_, payload, key, expires_at)
    except IdempotencyConflict:
        if key is None or expires_at is None:
            raise
        # raised before such events carried an expiry (its key's fingerprint has
        # none): the same notification, replayed as it was raised; else a conflict
        service.add_to(program, event.account, type_, payload, key, None)


def _is(nid: str) -> Callable[[Notification], bool]:
    """Only the notification read, not one raised since."""
    return lambda n: n.id == nid


def _about(fund: str) -> Callable[[Notification], bool]:
    """Only the LowBalance about this fund is cleared by this fund's top-up."""
    return lambda n: n.payload.get("fund") == fund


def event_key(type_: str, source_id: str) -> str:
    """The idempotency key of a notification the ledger raises: ``ev:{type}:{source}``,
    or its digest when that is longer than a key may be (a hold or tier id
    of a long account id), so that the event still raises it exactly once."""
    key = f"ev:{type_}:{source_id}"
    if len(key) <= MAX_ID_LENGTH:
        return key
    return f"ev:{type_}:h-{hashlib.sha256(key.encode()).hexdigest()[:48]}"

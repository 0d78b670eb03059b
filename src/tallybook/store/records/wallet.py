"""How the wallet's aggregates are stored: bonus grants, holds and charge intents.

Every row lives in the owner's account partition (see ``store/keys.py``). Rows
that fall due later carry ``gsi1pk``/``gsi1sk`` in the sparse due index until
they are resolved, which is how the jobs find them without scanning. A grant
or hold taken by a transaction is listed in its record's ``details`` as
``[grant id, expiry, amount]`` triples (:func:`takes_value`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from tallybook.domain.model import Account
from tallybook.domain.wallet import (
    BONUS,
    NEVER_DUE,
    Grant,
    GrantTake,
    Hold,
    HoldKind,
    HoldStatus,
    WalletMarks,
    in_spend_order,
)
from tallybook.errors import DamagedItem
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    Add,
    Compare,
    Condition,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    NotExists,
    Put,
    Remove,
    Set,
    SortCondition,
    Update,
    Value,
    all_of,
    any_of,
    key_of,
)
from tallybook.store.records.codec import iso, malformed, parse_iso, to_us

#: finished holds stay readable this long, then their row expires (TTL); the
#: transaction records that created and settled them are kept for ever
HOLD_RETENTION = timedelta(days=90)

#: the head attribute holding the wallet's marks, and how "never due" is spelled in it
WALLET_ATTR = "wallet"
_NEVER = "never"

DUE_GRANT = "grant"
DUE_HOLD = "hold"
DUE_CHARGE = "charge"
#: the due index's key attributes, removed from a row once it is resolved
_DUE_ATTRS = ("gsi1pk", "gsi1sk")


def marks_of(acct: Account) -> WalletMarks:
    """The wallet marks in ``acct``'s head (all unknown when it has none)."""
    value = acct.attributes.get(WALLET_ATTR)
    if not isinstance(value, Mapping):
        return WalletMarks()
    hold_due, grant_due, bonus_seq = (value.get(n) for n in ("hold_due", "grant_due", "bonus_seq"))
    return WalletMarks(
        hold_due=parse_iso(hold_due) if isinstance(hold_due, str) else None,
        grant_due=(NEVER_DUE if grant_due == _NEVER else parse_iso(grant_due))
        if isinstance(grant_due, str)
        else None,
        bonus_seq=int(bonus_seq) if isinstance(bonus_seq, int) else None,
    )


def marks_problem(acct: Account) -> str | None:
    """What keeps the wallet marks in ``acct``'s head from being read; None if they read."""
    value = acct.attributes.get(WALLET_ATTR)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"{WALLET_ATTR} {value!r} is not a map"
    for name in ("hold_due", "grant_due"):
        due = value.get(name)
        if due is None or (name == "grant_due" and due == _NEVER):
            continue
        try:
            parse_iso(due)
        except (TypeError, ValueError):
            return f"{name} {due!r} is not a time"
    bonus_seq = value.get("bonus_seq")
    if bonus_seq is not None and (not isinstance(bonus_seq, int) or isinstance(bonus_seq, bool)):
        return f"bonus_seq {bonus_seq!r} is not an integer"
    return None


def marks_attrs(marks: WalletMarks) -> dict[str, Value]:
    """The head's ``attrs`` update that stores ``marks``."""
    stored: dict[str, Value] = {}
    if marks.hold_due is not None:
        stored["hold_due"] = iso(marks.hold_due)
    if marks.grant_due is not None:
        stored["grant_due"] = _NEVER if marks.grant_due == NEVER_DUE else iso(marks.grant_due)
        stored["bonus_seq"] = marks.bonus_seq
    return {WALLET_ATTR: stored}


def due_attrs(program: str, kind: str, due: datetime, account: str, row_id: str) -> Item:
    pk, sk = _DUE_ATTRS
    return {
        pk: keys.wallet_due(program, kind, keys.shard_of(f"{account}#{row_id}")),
        sk: f"{iso(due)}#{account}#{row_id}",
    }


def is_due(item: Item) -> bool:
    """Whether a row is still in the due index (not resolved yet)."""
    return _DUE_ATTRS[0] in item


def _undue() -> tuple[Remove, Remove]:
    return Remove(_DUE_ATTRS[0]), Remove(_DUE_ATTRS[1])


def due_rows(store: ItemStore, program: str, kind: str, now: datetime) -> Iterator[Item]:
    """Index rows of ``kind`` due at or before ``now``, shard by shard (never a scan).

    The index is eventually consistent: an entry may show late, or still show
    a row already resolved. Callers re-read each row by key before acting, so
    a stale entry does nothing twice, and every run asks for everything due up
    to ``now``, so an entry missed by one run is taken by the next."""
    bound = SortCondition.lt(iso(now) + "$")  # '$' sorts just after the '#' separator
    for shard in range(keys.SHARDS):
        yield from store.query_all(
            keys.wallet_due(program, kind, shard), bound, index="gsi1", consistent=False
        )


def row_key(item: Item) -> Key:
    """The key of a row (or of the row a due-index entry stands for)."""
    return key_of(item)


# --- grants ------------------------------------------------------------------


def grant_key(program: str, account: str, grant_id: str, expires_at: datetime) -> Key:
    return keys.wallet_grant(program, account, to_us(expires_at), grant_id)


def grant_item(program: str, account: str, grant: Grant) -> Item:
    return {
        **grant_key(program, account, grant.id, grant.expires_at).as_item(),
        "program": program,
        "account": account,
        "grant_id": grant.id,
        "awarded": grant.awarded,
        "available": grant.available,
        "expires_at": iso(grant.expires_at),
        "granted_at": iso(grant.granted_at),
        **due_attrs(program, DUE_GRANT, grant.expires_at, account, grant.id),
    }


def grant_put(program: str, account: str, grant: Grant) -> Put:
    """A new grant (its id is never reused)."""
    return Put(grant_item(program, account, grant), ITEM_ABSENT)


def grant_account(item: Item) -> str:
    return cast(str, item["account"])


def grant_left(item: Item | None) -> int:
    """What a stored grant has available (0 when it is gone)."""
    return cast(int, item["available"]) if item else 0


def undue_empty_grant(key: Key) -> Update:
    """An expired grant with nothing left leaves the due index."""
    return Update(key, _undue(), Compare("available", "=", 0))


def expire_grant(key: Key, left: int) -> Update:
    """An expired grant gives up the ``left`` it still had and leaves the due index."""
    return Update(key, (Set("available", 0), *_undue()), Compare("available", "=", left))


def grant_from_item(item: Item) -> Grant:
    """The grant an item holds; :class:`DamagedItem` naming it and what is wrong when
    it does not read (its amounts are looked at, the rest caught: every wallet
    write of an owner with bonus reads the grants)."""
    awarded, available = item.get("awarded"), item.get("available")
    if type(awarded) is int and type(available) is int:
        try:
            return Grant(
                id=cast(str, item["grant_id"]),
                awarded=awarded,
                available=available,
                expires_at=parse_iso(cast(str, item["expires_at"])),
                granted_at=parse_iso(cast(str, item["granted_at"])),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    problem = grant_problem(item) or "it does not read as a grant"
    raise DamagedItem(
        f"bonus grant {item.get('sk')} of {item.get('account')} ({item.get('pk')}) is "
        f"damaged: {problem}"
    )


def grant_problem(item: Item) -> str | None:
    """What keeps a grant item from being read, or its amounts from making sense
    (``0 <= available <= awarded``); None if it reads."""
    found = malformed(
        item,
        text=("grant_id", "account"),
        ints=("awarded", "available"),
        times=("expires_at", "granted_at"),
    )
    if found is not None:
        return found
    awarded, available = cast(int, item["awarded"]), cast(int, item["available"])
    if awarded <= 0:
        return f"awarded {awarded} is not positive"
    if not 0 <= available <= awarded:
        return f"available {available} is not between 0 and the {awarded} awarded"
    return None


def checked_grants(
    store: ItemStore, program: str, account: str
) -> tuple[list[Grant], list[Grant], list[str]]:
    """The account's grants, for the check: those still in the due index, those
    the expiry job resolved, and what is wrong with each item that does not read
    as a grant, named by its key."""
    items, problems = _checked_items(
        store, program, account, keys.WALLET_GRANT_PREFIX, grant_problem, "grant"
    )
    due = [grant_from_item(item) for item in items if is_due(item)]
    resolved = [grant_from_item(item) for item in items if not is_due(item)]
    return due, resolved, problems


def _checked_items(
    store: ItemStore,
    program: str,
    account: str,
    prefix: str,
    problem_of: Callable[[Item], str | None],
    kind: str,
) -> tuple[list[Item], list[str]]:
    """The account's items under ``prefix`` that read as their ``kind``, for the
    check, and a line naming each that does not (``problem_of`` says why) by its key."""
    items: list[Item] = []
    problems: list[str] = []
    for item in store.query_all(
        keys.account_partition(program, account), SortCondition.begins_with(prefix)
    ):
        problem = problem_of(item)
        if problem is None:
            items.append(item)
        else:
            problems.append(f"malformed {kind} {item['sk']} of {account}: {problem}")
    return items, problems


def read_grants(
    store: ItemStore, program: str, account: str, now: datetime | None = None
) -> list[Grant]:
    """Grants earliest expiry first; with ``now``, only those unexpired at ``now``.

    A grant the expiry job already resolved (out of the due index) counts as
    expired whatever ``now`` says: the job's clock may run ahead of this one."""
    low = keys.wallet_grant_bound(to_us(now) + 1) if now is not None else keys.WALLET_GRANT_PREFIX
    items = store.query_all(
        keys.account_partition(program, account),
        SortCondition.between(low, keys.WALLET_GRANT_PREFIX + "~"),
    )
    return [grant_from_item(i) for i in items if now is None or is_due(i)]


def account_grants(store: ItemStore, program: str, acct: Account, now: datetime) -> list[Grant]:
    """:func:`read_grants` at ``now`` for a planner that has read ``acct``'s head.

    Every grant is awarded by a posting to the bonus fund, so an account whose
    bonus fund was never posted to (sequence 0) has no grant: no query then.
    """
    if acct.fund(BONUS).seq == 0:
        return []
    return read_grants(store, program, acct.id, now)


def spend_grant(program: str, account: str, grant: Grant, take: GrantTake) -> Update:
    """Take from a grant, on condition nobody changed it since we read it."""
    return Update(
        grant_key(program, account, grant.id, grant.expires_at),
        (Add("available", -take.amount),),
        Compare("available", "=", grant.available),
    )


def return_to_grant(program: str, account: str, take: GrantTake) -> Update:
    """Give released bonus back to its grant, on condition the grant is still due:
    one the expiry job took out of the due index (expired, and empty then) would
    keep what it is given for ever, counted by no balance view and never expired."""
    return Update(
        grant_key(program, account, take.grant_id, take.expires_at),
        (Add("available", take.amount),),
        all_of(Compare("available", ">=", 0), Exists(_DUE_ATTRS[0])),
    )


# --- holds -------------------------------------------------------------------


def takes_value(takes: Iterable[GrantTake], sign: int = 1) -> Value:
    """Grant takes as stored: ``[grant id, expiry, sign * amount]`` each."""
    return [[t.grant_id, iso(t.expires_at), sign * t.amount] for t in takes]


def takes_from_value(value: Value) -> tuple[GrantTake, ...]:
    rows = cast(list[list[Any]], value or [])
    return tuple(GrantTake(str(r[0]), parse_iso(str(r[1])), int(r[2])) for r in rows)


def hold_item(program: str, hold: Hold) -> Item:
    return {
        **keys.wallet_hold(program, hold.account, hold.id).as_item(),
        "program": program,
        "account": hold.account,
        "hold_id": hold.id,
        "kind": str(hold.kind),
        "status": str(hold.status),
        "amounts": cast(Value, dict(hold.amounts)),
        "grants": takes_value(hold.grants),
        "deadline": iso(hold.deadline),
        "created_at": iso(hold.created_at),
        "captured": 0,
        **due_attrs(program, DUE_HOLD, hold.deadline, hold.account, hold.id),
    }


def hold_key(program: str, account: str, hold_id: str) -> Key:
    return keys.wallet_hold(program, account, hold_id)


def hold_put(program: str, hold: Hold) -> Put:
    """A new hold (its id is its transaction's, never reused)."""
    return Put(hold_item(program, hold), ITEM_ABSENT)


def drop_hold(key: Key, status: HoldStatus) -> Delete:
    """Remove a hold row still in ``status`` (an orphan: its transaction never committed)."""
    return Delete(key, Compare("status", "=", str(status)))


def hold_from_item(item: Item) -> Hold:
    """The hold an item holds; :class:`DamagedItem` naming it and what is wrong when
    it does not read (caught, not looked for first: every settlement reads holds)."""
    try:
        return _hold(item)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        problem = hold_problem(item) or f"{type(exc).__name__}: {exc}"
        raise DamagedItem(
            f"hold {item.get('sk')} of {item.get('account')} ({item.get('pk')}) is "
            f"damaged: {problem}"
        ) from exc


def _hold(item: Item) -> Hold:
    finished = item.get("finished_at")
    return Hold(
        id=cast(str, item["hold_id"]),
        account=cast(str, item["account"]),
        kind=HoldKind(cast(str, item["kind"])),
        status=HoldStatus(cast(str, item["status"])),
        amounts=in_spend_order(cast(dict[str, int], item.get("amounts") or {})),
        grants=takes_from_value(item.get("grants")),
        deadline=parse_iso(cast(str, item["deadline"])),
        created_at=parse_iso(cast(str, item["created_at"])),
        captured=cast(int, item.get("captured") or 0),
        finished_at=parse_iso(finished) if isinstance(finished, str) else None,
        captured_funds=in_spend_order(cast(dict[str, int], item.get("captured_funds") or {})),
    )


def finish_hold(
    program: str,
    hold: Hold,
    status: HoldStatus,
    now: datetime,
    captured: dict[str, int] | None = None,
) -> Update:
    """Settle an active hold, kept readable for a while. A capture or void leaves the
    due index with it; an expiry or release stays in it until what it notifies is
    done (:func:`undue_settled_hold`), so a crash in between is found again."""
    captured = captured or {}
    undue = () if status in _NOTIFIED_AFTER else _undue()
    return Update(
        keys.wallet_hold(program, hold.account, hold.id),
        (
            Set("status", str(status)),
            Set("captured", sum(captured.values())),
            Set("captured_funds", cast(Value, captured)),
            Set("finished_at", iso(now)),
            Set("ttl", int((now + HOLD_RETENTION).timestamp())),
            *undue,
        ),
        Compare("status", "=", str(HoldStatus.ACTIVE)),
    )


#: settlements whose notifications (``HoldExpired``, a ``LowBalance`` dismissal)
#: the jobs raise again while the hold is still in the due index
_NOTIFIED_AFTER = frozenset((HoldStatus.EXPIRED, HoldStatus.RELEASED))


def undue_settled_hold(key: Key, status: HoldStatus) -> Update:
    """An expired or released hold leaves the due index once its notifications are done."""
    return Update(key, _undue(), all_of(Compare("status", "=", str(status)), Exists(_DUE_ATTRS[0])))


def read_hold(store: ItemStore, program: str, account: str, hold_id: str) -> Hold | None:
    item = store.get(hold_key(program, account, hold_id))
    return hold_from_item(item) if item is not None else None


def read_holds(store: ItemStore, program: str, account: str) -> list[Hold]:
    items = store.query_all(
        keys.account_partition(program, account),
        SortCondition.begins_with(keys.WALLET_HOLD_PREFIX),
    )
    return [hold_from_item(i) for i in items]


def hold_problem(item: Item) -> str | None:
    """What keeps a hold item from being read; None if it reads."""
    found = malformed(
        item, text=("hold_id", "account", "kind", "status"), times=("deadline", "created_at")
    )
    if found is not None:
        return found
    if item["kind"] not in {str(k) for k in HoldKind}:
        return f"kind {item['kind']!r} is unknown"
    if item["status"] not in {str(s) for s in HoldStatus}:
        return f"status {item['status']!r} is unknown"
    for name in ("amounts", "captured_funds"):
        amounts = item.get(name) or {}
        if not isinstance(amounts, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in amounts.values()
        ):
            return f"{name} {amounts!r} are not integers per fund"
    captured = item.get("captured") or 0
    if not isinstance(captured, int) or isinstance(captured, bool):
        return f"captured {captured!r} is not an integer"
    try:
        takes_from_value(item.get("grants"))
    except (TypeError, ValueError, IndexError, KeyError):
        return f"grants {item.get('grants')!r} are not grant takes"
    return None


def checked_holds(store: ItemStore, program: str, account: str) -> tuple[list[Hold], list[str]]:
    """The account's holds, for the check, and what is wrong with each item that
    does not read as a hold, named by its key."""
    items, problems = _checked_items(
        store, program, account, keys.WALLET_HOLD_PREFIX, hold_problem, "hold"
    )
    return [hold_from_item(item) for item in items], problems


# --- charge intents -------------------------------------------------------------
# ``C#{txn}``: an external charge in flight for a debit (see services/wallet/debit.py)

CHARGE_PENDING = "pending"
CHARGE_CANCELLING = "cancelling"


@dataclass(frozen=True, slots=True)
class ChargeIntent:
    account: str
    txn_id: str
    amount: int
    #: :data:`CHARGE_PENDING`, or :data:`CHARGE_CANCELLING` once reconcile took it
    status: str
    created_at: datetime
    #: the charge's idempotency key at the processor, new for every intent: a key
    #: charges at most once, so one that was refunded must never be charged again
    charge_key: str


def intent_key(program: str, account: str, txn_id: str) -> Key:
    return keys.wallet_charge(program, account, txn_id)


def charge_put(program: str, intent: ChargeIntent, due: datetime) -> Put:
    """A new charge intent, in the due index from ``due`` (put only if none is there)."""
    item: Item = {
        **intent_key(program, intent.account, intent.txn_id).as_item(),
        "program": program,
        "account": intent.account,
        "txn_id": intent.txn_id,
        "amount": intent.amount,
        "status": intent.status,
        "created_at": iso(intent.created_at),
        "charge_key": intent.charge_key,
        **due_attrs(program, DUE_CHARGE, due, intent.account, intent.txn_id),
    }
    return Put(item, ITEM_ABSENT)


def charge_of(item: Item) -> ChargeIntent:
    return ChargeIntent(
        account=cast(str, item["account"]),
        txn_id=cast(str, item["txn_id"]),
        amount=cast(int, item["amount"]),
        status=cast(str, item.get("status") or ""),
        created_at=parse_iso(cast(str, item["created_at"])),
        # an intent written before keys were per intent was charged under program:txn
        charge_key=cast(str, item.get("charge_key") or f"{item['program']}:{item['txn_id']}"),
    )


def read_charge(store: ItemStore, key: Key) -> ChargeIntent | None:
    item = store.get(key)
    return None if item is None else charge_of(item)


def _of_key(charge_key: str | None) -> list[Condition]:
    """The intent is the one of ``charge_key`` (an intent written before keys were
    per intent has no ``charge_key``: its key is the transaction's own)."""
    if charge_key is None:
        return []
    return [any_of(Compare("charge_key", "=", charge_key), NotExists("charge_key"))]


def drop_pending_charge(key: Key, charge_key: str | None = None) -> Delete:
    """Remove a charge intent still pending (a debit that committed or gave up), and
    only the one of ``charge_key`` when given."""
    return Delete(key, all_of(Compare("status", "=", CHARGE_PENDING), *_of_key(charge_key)))


def cancelling_charge(key: Key, charge_key: str | None = None) -> Update:
    """Reconcile (or the debit giving up on its charge) takes a pending charge intent
    (again, after a crash) to refund it; only the one of ``charge_key`` when given."""
    return Update(
        key,
        (Set("status", CHARGE_CANCELLING),),
        all_of(
            any_of(
                Compare("status", "=", CHARGE_PENDING), Compare("status", "=", CHARGE_CANCELLING)
            ),
            *_of_key(charge_key),
        ),
    )


def drop_charge(key: Key, charge_key: str) -> Delete:
    """Remove the charge intent of ``charge_key`` once its charge was refunded."""
    return Delete(key, all_of(Exists("status"), *_of_key(charge_key)))


def charge_problem(item: Item) -> str | None:
    """What keeps a charge intent item from being read, or its amount from making
    sense; None if it reads."""
    found = malformed(
        item,
        text=("program", "account", "txn_id", "status"),
        ints=("amount",),
        times=("created_at",),
    )
    if found is not None:
        return found
    if item["status"] not in (CHARGE_PENDING, CHARGE_CANCELLING):
        return f"status {item['status']!r} is unknown"
    if cast(int, item["amount"]) <= 0:
        return f"amount {item['amount']} is not positive"
    if not isinstance(item.get("charge_key", ""), str):
        return "charge_key is not text"
    return None


def checked_charges(
    store: ItemStore, program: str, account: str
) -> tuple[list[ChargeIntent], list[str]]:
    """The account's charge intents, for the check, and what is wrong with each item
    that does not read as one, named by its key."""
    items, problems = _checked_items(
        store, program, account, keys.WALLET_CHARGE_PREFIX, charge_problem, "charge intent"
    )
    return [charge_of(item) for item in items], problems

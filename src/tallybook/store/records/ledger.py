"""How the ledger's aggregates are stored: account heads, history entries,
transaction records and system-account counters (see docs/table-design.md).

The layout is chosen for the cost of a posting on DynamoDB, where every item a
transaction writes costs 2 WCU per KB and every index entry 1 more:

* A posting writes its **transaction record** (the idempotency record), the
  **head** of each customer account it touches and one **entry** per customer
  leg, and nothing else: a one-account credit is three items, 6 WCU.
* **System accounts** (``@issuance``, ``@external``...) have no item per
  posting. Their side of a posting is added to counters on the head the posting
  writes anyway (``sys:{account}:{fund}``), so conservation stays checkable: a
  system account's balance is the sum of those counters over the program's
  heads. A posting that touches no customer head (system to system) falls back
  to one of 16 shards of the system account.
* The **owner index** (``gsi2``) lists only records that leave no entry in the
  owner's history (holds, voids); the rest of an account's transactions are
  found from its entries, which sit in its own partition (strongly consistent).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from tallybook.domain.model import Account, FundState, Transaction
from tallybook.errors import StoreValidationError
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    Add,
    Item,
    ItemStore,
    Key,
    Put,
    Set,
    SortCondition,
    Update,
    Value,
    all_of,
    equals,
    key_of,
)
from tallybook.store.records.codec import (
    account_from_item,
    fund_state_to_value,
    head_problem,
    iso,
    leg_to_value,
    parse_iso,
    to_us,
    transaction_from_item,
    transaction_problem,
)


def system_counter_attr(system_account: str, fund: str) -> str:
    """Head attribute counting what this head's postings moved against a system
    account (decoded into ``Account.system`` by :func:`.codec.account_from_item`)."""
    return f"sys:{system_account}:{fund}"


# --- heads -----------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def head_key(program_id: str, account_id: str) -> Key:
    """The head's key, remembered: a posting needs it to read the head and again
    to write it, and busy accounts post again and again (keys are frozen values)."""
    return keys.account_head(program_id, account_id)


def read_head(store: ItemStore, program_id: str, account_id: str) -> Account | None:
    item = store.get(head_key(program_id, account_id))
    return None if item is None else account_from_item(item)


def read_heads(store: ItemStore, program_id: str, account_ids: Sequence[str]) -> list[Account]:
    """Heads of several accounts in one batch request (missing ones are left out)."""
    found = store.batch_get([head_key(program_id, a) for a in account_ids])
    return [account_from_item(item) for item in found]


def checked_head(store: ItemStore, program_id: str, account_id: str) -> Account | str | None:
    """An account's head, for the check: None if it has none, and what is wrong with
    it if it does not read."""
    item = store.get(head_key(program_id, account_id))
    if item is None:
        return None
    problem = head_problem(item)
    return account_from_item(item) if problem is None else problem


def checked_heads(store: ItemStore, program_id: str, account_ids: Sequence[str]) -> list[Account]:
    """:func:`read_heads` for the check: a head that does not read is left out too
    (the check of its account says what is wrong with it)."""
    found = store.batch_get([head_key(program_id, a) for a in account_ids])
    return [account_from_item(item) for item in found if head_problem(item) is None]


#: every head write counts its version up by one (update operations are frozen values)
_NEXT_VERSION = Add("version", 1)


def head_update(
    program_id: str,
    account: Account,
    *,
    funds: Mapping[str, FundState] | None = None,
    attrs: Mapping[str, Value] | None = None,
    sets: Mapping[str, Value] | None = None,
    system: Mapping[tuple[str, str], int] | None = None,
    changes: Changes | None = None,
) -> Update:
    """Write a head read at ``account.version``: fails if anyone wrote it since.
    ``changes``: what takes the account's next change numbers (see :class:`Changes`)."""
    updates: list[Set | Add] = [_NEXT_VERSION]
    if changes is not None and changes.events:
        last = [account.changes + len(changes.events), changes.events[-1], changes.at_us]
        updates.append(Set("chg", cast(Value, last)))
    if funds is not None:
        updates.append(Set("funds", {name: fund_state_to_value(s) for name, s in funds.items()}))
    if attrs is not None:
        updates.append(Set("attrs", cast(Value, {**account.attributes, **attrs})))
    for attr, value in (sets or {}).items():
        updates.append(Set(attr, value))
    for (system_account, fund), amount in (system or {}).items():
        updates.append(Add(system_counter_attr(system_account, fund), amount))
    return Update(
        head_key(program_id, account.id),
        tuple(updates),
        all_of(equals("version", account.version)),
    )


@dataclass(frozen=True, slots=True)
class Changes:
    """Changes of one account a write makes, each taking the account's next number
    (``chg`` on the head, gap-free; the fan-out orders the account's webhook events
    by it): the id of each change's first event, in order, and when they are made."""

    events: tuple[str, ...]
    at_us: int

    def numbers(self, account: Account) -> list[Value]:
        """What each change's item records of its number: ``[n, previous change's
        first event id, its time in µs]``, or ``[n]`` for the account's first."""
        out: list[Value] = []
        n, previous, previous_us = account.changes, account.last_change, account.last_change_us
        for event in self.events:
            n += 1
            out.append([n] if previous is None else [n, previous, previous_us])
            previous, previous_us = event, self.at_us
        return out

    def taken_on(self, program_id: str, head: Account | None) -> tuple[list[Value], Update | None]:
        """What each change's item records of its number, and the update of ``head``
        that takes the numbers (for an account without a head: no numbers, ``None``
        each, and no update)."""
        if head is None:
            return [None] * len(self.events), None
        return self.numbers(head), head_update(program_id, head, changes=self)


# --- transaction records -----------------------------------------------------


def transaction_key(program_id: str, txn_id: str) -> Key:
    return keys.transaction(program_id, txn_id)


def read_transaction(store: ItemStore, program_id: str, txn_id: str) -> Item | None:
    return store.get(transaction_key(program_id, txn_id))


def read_transactions(store: ItemStore, program_id: str, txn_ids: Sequence[str]) -> list[Item]:
    out: list[Item] = []
    for start in range(0, len(txn_ids), 100):
        chunk = txn_ids[start : start + 100]
        out += store.batch_get([transaction_key(program_id, t) for t in chunk])
    return out


@dataclass(frozen=True, slots=True)
class CheckedRecord:
    """A transaction record as the check reads it: the transaction and its owner
    (the account it was made for, whose head the posting engine gives the system
    legs' counters when it is one of the accounts the posting changes)."""

    txn: Transaction
    owner: str | None


def checked_transactions(
    store: ItemStore, program_id: str, txn_ids: Sequence[str]
) -> dict[str, CheckedRecord | str]:
    """The records of ``txn_ids`` that exist, for the check, by id: each as read,
    or as what keeps it from being read."""
    wanted = {transaction_key(program_id, t): t for t in txn_ids}
    out: dict[str, CheckedRecord | str] = {}
    for item in read_transactions(store, program_id, txn_ids):
        problem = transaction_problem(item)
        owner = item.get("owner")
        out[wanted[key_of(item)]] = (
            problem
            if problem is not None
            else CheckedRecord(
                transaction_from_item(item), owner if isinstance(owner, str) else None
            )
        )
    return out


def order_transactions(store: ItemStore, program_id: str, order_id: str) -> list[Item]:
    """Records indexed under ``order_id`` (the order index: eventually consistent)."""
    return list(store.query_all(keys.order_index(program_id, order_id), index="gsi1"))


def fingerprint_of(item: Item) -> Value:
    return item.get("fingerprint")


def change_numbers(item: Item) -> dict[str, int]:
    """Per account, the change number a transaction record took (its ``chg``)."""
    found = item.get("chg")
    if not isinstance(found, dict):
        return {}
    out: dict[str, int] = {}
    for account, value in found.items():
        if isinstance(value, list) and value and isinstance(value[0], int):
            out[account] = value[0]
    return out


def transaction_put(
    record: Transaction,
    *,
    fingerprint: str,
    owner: str | None,
    index_owner: bool,
    index_order: bool = True,
    numbers: Mapping[str, Value] | None = None,
) -> Put:
    """The idempotency record: put only if the id was never used. ``numbers``: per
    account, the change number it takes (:meth:`Changes.numbers`)."""
    now_iso = iso(record.created_at)
    item: Item = {
        **transaction_key(record.program, record.id).as_item(),
        "program": record.program,
        "txn_id": record.id,
        "type": record.type,
        "fingerprint": fingerprint,
        "legs": [leg_to_value(p) for p in record.legs],
        "created_at": now_iso,
        "details": cast(Value, record.details),
    }
    if record.metadata:
        item["metadata"] = cast(Value, record.metadata)
    if record.description is not None:
        item["description"] = record.description
    if numbers:
        item["chg"] = dict(numbers)
    if record.order_id is not None:
        item["order_id"] = record.order_id
    if record.order_id is not None and index_order:
        item["gsi1pk"] = keys.order_index(record.program, record.order_id)
        item["gsi1sk"] = f"{now_iso}#{record.id}"
    if owner is not None:
        item["owner"] = owner
        if index_owner:
            item["gsi2pk"] = keys.owner_index(record.program, owner)
            item["gsi2sk"] = f"{now_iso}#{record.id}"
    return Put(item, ITEM_ABSENT)


# --- history entries -----------------------------------------------------------


def entry_put(
    record: Transaction,
    account_id: str,
    fund: str,
    unit: str,
    amount: int,
    state: FundState,
    index: Mapping[str, Value] | None = None,
) -> Put:
    """One customer leg's history entry, carrying the resulting balance."""
    entry: Item = {
        **keys.entry(record.program, account_id, fund, state.last_us, state.seq).as_item(),
        "program": record.program,
        "account": account_id,
        "fund": fund,
        "unit": unit,
        "seq": state.seq,
        "amount": amount,
        "balance": state.balance,
        "txn_id": record.id,
        "type": record.type,
        "created_at": iso(record.created_at),
    }
    if record.order_id is not None:
        entry["order_id"] = record.order_id
    if record.description is not None:
        entry["description"] = record.description
    if record.metadata:
        entry["metadata"] = cast(Value, record.metadata)
    if index:
        entry.update(index)
    return Put(entry, ITEM_ABSENT)


# --- system accounts -------------------------------------------------------------


def system_shard_update(
    program_id: str, system_account: str, txn_id: str, amounts: Mapping[str, int]
) -> Update:
    """The fallback for a posting with no customer head to carry its system side."""
    adds = [Add(keys.fund_attr(fund), amount) for fund, amount in amounts.items()]
    return Update(
        keys.system_shard(program_id, system_account, txn_id),
        (*adds, Set("program", program_id), Set("account", system_account)),
    )


def system_shard_totals(store: ItemStore, program_id: str, system_account: str) -> dict[str, int]:
    return checked_shard_totals(store, program_id, system_account)[0]


def checked_shard_totals(
    store: ItemStore, program_id: str, system_account: str
) -> tuple[dict[str, int], list[str]]:
    """Per fund, what a system account's shards hold, and (for the check) each
    counter that is not an integer, named by its shard's key (left out of the totals)."""
    totals: dict[str, int] = {}
    problems: list[str] = []
    for item in store.batch_get(keys.system_shards(program_id, system_account)):
        for name, value in item.items():
            if not name.startswith("f_"):
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                totals[name[2:]] = totals.get(name[2:], 0) + value
            else:
                problems.append(
                    f"malformed {system_account} shard {item['pk']}: {name} {value!r} "
                    "is not an integer"
                )
    return totals, problems


# --- an account's transactions, newest first -------------------------------------


class _Stream:
    """One newest-first source of an account's transactions (a fund's history, or
    the owner index), read page by page.

    The list is ordered by the transactions' ``created_at``: the same time for every
    entry of a transaction, whichever fund. An entry's sort key carries its fund's
    own time instead, strictly later than the fund's last one, so one transaction
    can sit at different times in different funds. Every unread entry of a fund was
    created before the fund time of the last one read: that tells when all the
    entries created at a given time have been read."""

    def __init__(
        self,
        store: ItemStore,
        partition: str,
        prefix: str,
        index: str | None,
        after: str | None,
        inclusive: bool,
    ) -> None:
        self.store, self.partition, self.prefix, self.index = store, partition, prefix, index
        self.after = after  # where this page starts (itself included when ``inclusive``)
        self.inclusive = inclusive
        #: read and not listed yet, in the order read: (created_at in us, txn id, sort key)
        self.buffer: list[tuple[int, str, str]] = []
        self.unread_before: int | None = None  # every unread entry was created before this
        self.last: str | None = None  # the sort key of the last entry read
        self.cursor: str | None = None
        self.done = False
        self.page_size = 25

    def _complete(self, at: int) -> bool:
        """Whether every entry created at ``at`` or later has been read."""
        return self.done or (self.unread_before is not None and self.unread_before <= at)

    def _read(self) -> None:
        sort: SortCondition | None
        if self.after is None:
            sort = SortCondition.begins_with(self.prefix) if self.prefix else None
        elif self.prefix:
            sort = SortCondition.between(self.prefix, self.after)
        else:
            sort = (SortCondition.le if self.inclusive else SortCondition.lt)(self.after)
        page = self.store.query(
            self.partition,
            sort,
            index=self.index,
            forward=False,
            limit=self.page_size,
            cursor=self.cursor,
        )
        self.cursor = page.cursor
        self.done = page.cursor is None
        sk_attr = "sk" if self.index is None else "gsi2sk"
        for item in page.items:
            sk = cast(str, item[sk_attr])
            if sk == self.after and not self.inclusive:
                continue
            created = to_us(parse_iso(cast(str, item["created_at"])))
            self.buffer.append((created, str(item["txn_id"]), sk))
            self.last = sk
            # the owner index is in created_at order itself
            self.unread_before = keys.entry_us(sk) if self.index is None else created + 1

    def newest(self, listed_from: int | None) -> int | None:
        """The latest ``created_at`` not listed yet (those from ``listed_from`` on were)."""
        while True:
            if listed_from is not None:
                self.buffer = [e for e in self.buffer if e[0] < listed_from]
            if self.buffer and self._complete(max(e[0] for e in self.buffer)):
                return max(e[0] for e in self.buffer)
            if self.done:
                return None
            self._read()

    def at(self, created: int) -> list[str]:
        """Ids of the transactions created at ``created``, newest first (all read)."""
        while not self._complete(created):
            self._read()
        ids: list[str] = []
        for c, txn_id, _ in self.buffer:
            if c == created and txn_id not in ids:
                ids.append(txn_id)
        return ids

    def drop(self, created: int) -> None:
        self.buffer = [e for e in self.buffer if e[0] != created]

    def resume_at(self) -> str | None:
        """Where the next page reads from (inclusive): the first entry read and not
        listed, else the last one read."""
        if self.buffer:
            return max(sk for _, _, sk in self.buffer)
        return self.last


def _newest_first(chains: Sequence[list[str]]) -> list[str]:
    """The transactions created at one time, newest first: each source lists its
    own newest first (a fund in commit order); a transaction comes once every
    source it is in has listed those before it; among those free to come, the
    greatest id first."""
    chains = [c for c in chains if c]
    where: dict[str, list[int]] = {}
    for i, chain in enumerate(chains):
        for txn_id in chain:
            where.setdefault(txn_id, []).append(i)
    pos = [0] * len(chains)
    listed: set[str] = set()
    order: list[str] = []
    while True:
        fronts = {c[pos[i]] for i, c in enumerate(chains) if pos[i] < len(c)}
        if not fronts:
            return order
        free = [
            t
            for t in fronts
            if all(pos[i] < len(chains[i]) and chains[i][pos[i]] == t for i in where[t])
        ]
        nxt = max(free or fronts)
        order.append(nxt)
        listed.add(nxt)
        for i in where[nxt]:
            while pos[i] < len(chains[i]) and chains[i][pos[i]] in listed:
                pos[i] += 1


def _decode_at(text: str) -> tuple[int, str]:
    us, sep, txn_id = text.partition("#")
    if not sep or not us.isascii() or not us.isdigit():
        raise StoreValidationError("malformed cursor")
    return int(us), txn_id


def owner_transaction_ids(
    store: ItemStore,
    program_id: str,
    account_id: str,
    funds: Sequence[str],
    *,
    limit: int,
    cursor: Mapping[str, str] | None,
) -> tuple[list[str], dict[str, str] | None]:
    """Ids of an account's transactions, newest first, and the cursor of the next page.

    Merges the account's per-fund histories (base table) with the owner index
    (records without an entry of the owner) by ``created_at``; transactions made
    at the same time come in commit order where a fund shows it, else by id.
    ``cursor`` maps each source to where it resumes and ``at`` to the time listed
    up to (and the last id listed at that time, when the page ended among them),
    so a transaction whose entries straddle a page is listed once.
    """
    if cursor is not None:
        # another listing's cursor (a fund's history, say) would read as a first page
        prefixes = {f"e:{fund}": keys.entry_prefix(fund) for fund in funds} | {"owner": ""}
        sources = {k: v for k, v in cursor.items() if k != "at"}
        if not sources or not all(v.startswith(prefixes.get(k, "\0")) for k, v in sources.items()):
            raise StoreValidationError("cursor does not belong to this query")
    cursor = cursor or {}
    at = _decode_at(cursor["at"]) if "at" in cursor else None
    # a cursor without ``at`` (from before it had one) resumes after its sort keys
    inclusive = at is not None
    partition = keys.account_partition(program_id, account_id)
    streams: dict[str, _Stream] = {
        f"e:{fund}": _Stream(
            store, partition, keys.entry_prefix(fund), None, cursor.get(f"e:{fund}"), inclusive
        )
        for fund in funds
    }
    streams["owner"] = _Stream(
        store, keys.owner_index(program_id, account_id), "", "gsi2", cursor.get("owner"), inclusive
    )
    # listed already: everything created after at[0]; at at[0], through at[1] (all: "")
    listed_from = None if at is None else at[0] + (1 if at[1] else 0)
    taken: list[str] = []
    last: tuple[int, str] | None = None
    partial = False
    while len(taken) < limit:
        times = [t for s in streams.values() if (t := s.newest(listed_from)) is not None]
        if not times:
            break
        created = max(times)
        order = _newest_first([s.at(created) for s in streams.values()])
        if at is not None and at[1] and created == at[0]:
            order = order[order.index(at[1]) + 1 :] if at[1] in order else []
        room = limit - len(taken)
        taken += order[:room]
        if len(order) > room:
            last, partial = (created, order[room - 1]), True
            break
        for s in streams.values():
            s.drop(created)
        last = (created, "")
        listed_from = created
    more = partial or any(s.newest(listed_from) is not None for s in streams.values())
    if not more or last is None:
        return taken, None
    after = {k: v for k, v in cursor.items() if k != "at"}
    for name, stream in streams.items():
        resume = stream.resume_at()
        if resume is not None:
            after[name] = resume
    after["at"] = f"{last[0]}#{last[1]}"
    return taken, after


def iter_directory(store: ItemStore, program_id: str) -> Iterator[Item]:
    """Every row of the program's sharded account directory (no scan)."""
    for shard in range(keys.SHARDS):
        yield from store.query_all(keys.directory_partition(program_id, shard))


def iter_entry_items(
    store: ItemStore, program_id: str, account_id: str, fund: str
) -> Iterator[Item]:
    yield from store.query_all(
        keys.account_partition(program_id, account_id),
        SortCondition.begins_with(keys.entry_prefix(fund)),
    )

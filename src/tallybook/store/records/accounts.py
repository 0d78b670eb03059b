"""How accounts are opened and listed, and their history read by page.

Opening writes the account's head (``HEAD``, zero balances in every fund of
its program) and its row in the program's sharded account directory
(``DIR#{program}#{shard}``), in one transaction that fails if the head exists.
History entries (``E#{fund}#{us}#{seq}``) are written by the posting engine
(:mod:`.ledger`) and read here, a page at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import NamedTuple, cast

from tallybook.domain.model import Account, Entry, Program
from tallybook.store import keys
from tallybook.store.port import ITEM_ABSENT, Item, ItemStore, Put, SortCondition, Value
from tallybook.store.records.codec import account_from_item, entry_from_item, entry_problem, iso
from tallybook.store.records.ledger import head_key, iter_directory
from tallybook.store.records.loyalty import lot_problem, lot_span


def open_account(
    program: Program, account_id: str, now: datetime, client_attributes: Mapping[str, str]
) -> tuple[list[Put], Account]:
    """The writes that open ``account_id`` (the head only if none is there), and
    the account as they store it."""
    head: Item = {
        **head_key(program.id, account_id).as_item(),
        "program": program.id,
        "account": account_id,
        "created_at": iso(now),
        "version": 0,
        "funds": {f.name: {"balance": 0, "held": 0, "seq": 0, "last_us": 0} for f in program.funds},
        "attrs": {},
    }
    if client_attributes:  # the client's, apart from the services' state in ``attrs``
        head["client_attrs"] = cast(Value, dict(client_attributes))
    directory: Item = {
        **keys.directory(program.id, account_id).as_item(),
        "program": program.id,
        "account": account_id,
    }
    return [Put(head, ITEM_ABSENT), Put(directory)], account_from_item(head)


def entries_page(
    store: ItemStore,
    program_id: str,
    account_id: str,
    fund: str,
    *,
    since_us: int | None,
    until_us: int | None,
    forward: bool,
    limit: int,
    cursor: str | None,
) -> tuple[list[Entry], str | None]:
    """One page of a fund's entries made in ``[since_us, until_us)``, and the next cursor."""
    low, high = keys.time_window(keys.entry_prefix(fund), since_us, until_us)
    page = store.query(
        keys.account_partition(program_id, account_id),
        SortCondition.between(low, high),
        forward=forward,
        limit=limit,
        cursor=cursor,
    )
    return [entry_from_item(i) for i in page.items], page.cursor


def checked_entries(
    store: ItemStore, program_id: str, account_id: str, fund: str, *, forward: bool = True
) -> Iterator[Entry | str]:
    """Every entry of a fund, oldest first (newest first unless ``forward``), for the
    check: an item that does not read as an entry comes as what is wrong with it,
    named by its key."""
    items = store.query_all(
        keys.account_partition(program_id, account_id),
        SortCondition.begins_with(keys.entry_prefix(fund)),
        forward=forward,
    )
    for item in items:
        yield _checked_entry(item)


class CheckedEntry(NamedTuple):
    """An entry as the check reads it: the fund its key files it under, the entry
    (or what keeps it from being read), and the lot it carries (an earn's entry:
    ``(cum_end, lot_amount)``), if any."""

    fund: str
    entry: Entry | str
    lot: tuple[int, int] | None


def checked_account_entries(
    store: ItemStore, program_id: str, account_id: str
) -> Iterator[CheckedEntry]:
    """Every entry of an account, fund by fund (in the order of their names), each
    fund's oldest first, as :func:`checked_entries` gives them: one query reads the
    funds the program has and any it no longer has."""
    items = store.query_all(
        keys.account_partition(program_id, account_id),
        SortCondition.begins_with(keys.ENTRIES_PREFIX),
    )
    for item in items:
        entry = _checked_entry(item)
        lot = None if isinstance(entry, str) else lot_span(item)
        yield CheckedEntry(keys.entry_fund(cast(str, item["sk"])), entry, lot)


def _checked_entry(item: Item) -> Entry | str:
    problem = entry_problem(item) or lot_problem(item)
    return entry_from_item(item) if problem is None else f"entry {item['sk']}: {problem}"


def account_ids(store: ItemStore, program_id: str) -> Iterator[str]:
    """Every customer account of a program, from the sharded directory (no scan)."""
    for item in iter_directory(store, program_id):
        yield cast(str, item["account"])


def in_directory(store: ItemStore, program_id: str, account_id: str) -> bool:
    """Whether the program's account directory lists ``account_id``."""
    return store.get(keys.directory(program_id, account_id)) is not None

"""Accounts: open, read balances in one request, history pages, directory listing.

Accounts are opened explicitly (``open``) with zero balances in every fund of
their program; posting to an account that was never opened is a ``NotFound``
error. Opening is idempotent: opening an open account returns it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from tallybook.domain.ids import check_fund, check_id
from tallybook.domain.model import Account, Balance, Entry, Program
from tallybook.errors import ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.programs import ProgramService
from tallybook.store import keys
from tallybook.store.port import ItemStore, NotExists, Put, SortCondition, Value
from tallybook.store.records.codec import account_from_item, entry_from_item, iso, to_us

MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class EntryPage:
    entries: list[Entry]
    cursor: str | None


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be an integer from 1 to {MAX_PAGE}")
    return limit


class AccountService:
    def __init__(self, store: ItemStore, programs: ProgramService, clock: Clock) -> None:
        self.store = store
        self.programs = programs
        self.clock = clock

    def open(
        self, program_id: str, account_id: str, *, attributes: dict[str, Any] | None = None
    ) -> tuple[Account, bool]:
        """Open an account with zero balances; returns (account, created).

        ``attributes`` are the client's own (``Account.client_attributes``), stored
        apart from the state the services keep on the head (``Account.attributes``),
        so a client key such as ``wallet`` or ``loyalty`` neither reaches nor shows it.
        """
        program = self.programs.get(program_id)
        check_id(account_id, "account id")
        now = self.clock.now()
        head = {
            **keys.account_head(program_id, account_id).as_item(),
            "program": program_id,
            "account": account_id,
            "created_at": iso(now),
            "version": 0,
            "funds": {
                f.name: {"balance": 0, "held": 0, "seq": 0, "last_us": 0} for f in program.funds
            },
            "attrs": {},
        }
        if attributes:  # the client's, apart from the services' state in ``attrs``
            head["client_attrs"] = cast(Value, dict(attributes))
        directory = {
            **keys.directory(program_id, account_id).as_item(),
            "program": program_id,
            "account": account_id,
        }
        try:
            self.store.transact_write(
                [Put(cast(dict[str, Value], head), NotExists("pk")), Put(directory)]
            )
        except ConditionFailed:
            return self.get(program_id, account_id), False
        return account_from_item(cast(dict[str, Value], head)), True

    def get(self, program_id: str, account_id: str) -> Account:
        check_id(program_id, "program id")
        check_id(account_id, "account id")
        item = self.store.get(keys.account_head(program_id, account_id))
        if item is None:
            raise NotFound(f"account {account_id} not found in program {program_id}")
        return account_from_item(item)

    def balances(self, program_id: str, account_id: str) -> list[Balance]:
        """Every fund's balance, held and available: one storage request."""
        program = self.programs.get(program_id)
        return balances_of(program, self.get(program_id, account_id))

    def history(
        self,
        program_id: str,
        account_id: str,
        fund: str,
        *,
        newest_first: bool = True,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> EntryPage:
        """One page of a fund's entries; ``since`` inclusive, ``until`` exclusive."""
        program = self.programs.get(program_id)
        check_id(account_id, "account id")
        check_fund(fund)
        check_limit(limit)
        if program.fund(fund) is None:
            raise NotFound(f"program {program_id} has no fund {fund!r}")
        if since and until and since >= until:
            raise ValidationError("'since' must be before 'until'")
        low = keys.entry_time_bound(fund, to_us(since)) if since else keys.entry_prefix(fund)
        high = (
            keys.entry_time_bound(fund, to_us(until) - 1) + "#~"
            if until
            else keys.entry_prefix(fund) + "~"
        )
        page = self.store.query(
            keys.account_partition(program_id, account_id),
            SortCondition.between(low, high),
            forward=not newest_first,
            limit=limit,
            cursor=cursor,
        )
        if not page.items and cursor is None:
            self.get(program_id, account_id)
        entries = [entry_from_item(i) for i in page.items]
        return EntryPage(entries, page.cursor)

    def iter_history(
        self, program_id: str, account_id: str, fund: str, *, page_size: int = 500
    ) -> Iterator[Entry]:
        """Every entry of a fund, oldest first."""
        cursor: str | None = None
        while True:
            page = self.history(
                program_id, account_id, fund, newest_first=False, limit=page_size, cursor=cursor
            )
            yield from page.entries
            if page.cursor is None:
                return
            cursor = page.cursor

    def list_ids(self, program_id: str) -> Iterator[str]:
        """Every customer account of a program, from the sharded directory (no scan)."""
        self.programs.get(program_id)
        for shard in range(keys.SHARDS):
            for item in self.store.query_all(keys.directory_partition(program_id, shard)):
                yield cast(str, item["account"])


def balances_of(program: Program, account: Account) -> list[Balance]:
    out = []
    for spec in program.funds:
        state = account.fund(spec.name)
        out.append(Balance(spec.name, spec.unit, state.balance, state.held, state.available))
    return out

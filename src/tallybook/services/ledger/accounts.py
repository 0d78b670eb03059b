"""Accounts: open, read balances in one request, history pages, directory listing.

Accounts are opened explicitly (``open``) with zero balances in every fund of
their program; posting to an account that was never opened is a ``NotFound``
error. Opening is idempotent: opening an open account returns it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tallybook.domain.ids import check_flag, check_fund, check_id
from tallybook.domain.model import Account, Balance, Entry, Program
from tallybook.domain.postings import check_attributes
from tallybook.domain.times import check_optional_time
from tallybook.errors import ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.programs import ProgramService
from tallybook.store.port import ItemStore
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records.accounts import account_ids, entries_page, open_account
from tallybook.store.records.codec import to_us
from tallybook.store.records.ledger import read_head

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
    """``ledger.accounts``: open accounts, read their balances and history."""

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
        attrs = check_attributes(attributes)
        writes, opened = open_account(program, account_id, self.clock.now(), attrs)
        try:
            self.store.transact_write(writes)
        except ConditionFailed:
            return self.get(program_id, account_id), False
        return opened, True

    def get(self, program_id: str, account_id: str) -> Account:
        """The account (every fund's balance and what it withholds), or :class:`NotFound`."""
        check_id(program_id, "program id")
        check_id(account_id, "account id")
        found = read_head(self.store, program_id, account_id)
        if found is None:
            raise NotFound(f"account {account_id} not found in program {program_id}")
        return found

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
        check_flag(newest_first, "newest_first")
        since = check_optional_time(since, "since")
        until = check_optional_time(until, "until")
        if program.fund(fund) is None:
            raise NotFound(f"program {program_id} has no fund {fund!r}")
        if since and until and since >= until:
            raise ValidationError("'since' must be before 'until'")
        since_us = to_us(since) if since else None
        until_us = to_us(until) if until else None
        listing = ("entries", program_id, account_id, fund, since_us, until_us, newest_first)
        entries, next_cursor = entries_page(
            self.store,
            program_id,
            account_id,
            fund,
            since_us=since_us,
            until_us=until_us,
            forward=not newest_first,
            limit=limit,
            cursor=unbind_cursor(cursor, *listing),
        )
        if not entries and cursor is None:
            self.get(program_id, account_id)
        return EntryPage(entries, bind_cursor(next_cursor, *listing))

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
        yield from account_ids(self.store, program_id)


def balances_of(program: Program, account: Account) -> list[Balance]:
    out = []
    for spec in program.funds:
        state = account.fund(spec.name)
        out.append(Balance(spec.name, spec.unit, state.balance, state.held, state.available))
    return out

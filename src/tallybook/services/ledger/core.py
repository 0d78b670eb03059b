"""What the other capabilities build on, as explicit collaborators.

Wallet and loyalty write through the posting engine, read programs, accounts
and transaction records, tell the time and raise events: they receive these
as one :class:`LedgerCore`, a frozen set of seven named collaborators. The
narrower services (keys, billing, webhooks, notifications, check) take only
the parameters they use, typed by a Protocol where one method is enough
(:class:`ProgramLookup`, :class:`ProgramList`, :class:`AccountLookup`).

``tallybook.Ledger`` builds one core with :meth:`LedgerCore.build` and hands
its parts to the capabilities; a unit test does the same over ``memory://``
and builds the one service it tests, without a ``Ledger``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol

from tallybook.domain.model import Account, Program
from tallybook.services.clock import Clock, SystemClock, check_clock
from tallybook.services.events import EventBus
from tallybook.services.ledger.accounts import AccountService
from tallybook.services.ledger.postings import PostingEngine
from tallybook.services.ledger.programs import ProgramService
from tallybook.services.ledger.transactions import TransactionService
from tallybook.store.port import ItemStore


class ProgramLookup(Protocol):
    """A program by id (``NotFound`` when there is none): ``ProgramService.get``."""

    def get(self, program_id: str, *, fresh: bool = False) -> Program: ...


class ProgramList(Protocol):
    """Every program's id: ``ProgramService.list``."""

    def list(self) -> builtins.list[str]: ...


class ProgramDirectory(ProgramLookup, ProgramList, Protocol):
    """Programs by id, and all of them."""


class AccountLookup(Protocol):
    """An account's head (``NotFound`` when it was never opened): ``AccountService.get``."""

    def get(self, program_id: str, account_id: str) -> Account: ...


@dataclass(frozen=True, slots=True)
class LedgerCore:
    """The port, the clock, the ledger capability's services and the event bus."""

    store: ItemStore
    clock: Clock
    programs: ProgramService
    accounts: AccountService
    transactions: TransactionService
    engine: PostingEngine
    events: EventBus

    @classmethod
    def build(cls, store: ItemStore, clock: Clock | None = None) -> LedgerCore:
        """The ledger capability over ``store``: each service gets what it uses."""
        time = SystemClock() if clock is None else check_clock(clock)
        programs = ProgramService(store, time)
        engine = PostingEngine(store, programs, time)
        return cls(
            store=store,
            clock=time,
            programs=programs,
            accounts=AccountService(store, programs, time),
            transactions=TransactionService(engine),
            engine=engine,
            events=EventBus(),
        )

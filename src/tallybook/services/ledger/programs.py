"""Programs: create, read (cached briefly), list and update settings."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tallybook.domain.ids import check_fund, check_id, check_unit
from tallybook.domain.model import FundSpec, Program, default_funds
from tallybook.domain.money import MAX_AMOUNT
from tallybook.errors import AlreadyExists, ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.store.port import ItemStore
from tallybook.store.records.codec import LAYOUT
from tallybook.store.records.programs import (
    program_create,
    program_ids,
    program_replace,
    read_program,
)

#: how long a process trusts its cached copy of a program's configuration
CACHE_SECONDS = 2.0
#: a program's display name; the program item is read on every cache miss
MAX_PROGRAM_NAME = 200
#: funds per program: every account head holds a balance map and system
#: counters per fund it uses, and DynamoDB caps an item at 400 KB (a posting
#: rewrites the whole head, paying 1 WCU per KB)
MAX_FUNDS = 100

#: runs after a fund's low-balance threshold is set or cleared: (program, fund)
ThresholdListener = Callable[[Program, str], None]


def check_program(program_id: object, *, name: object, currency: object) -> None:
    """Refuse a new program's id, name or currency that :meth:`ProgramService.create`
    would refuse (``program create`` asks before it opens the store, which may make
    its file)."""
    check_id(program_id, "program id")
    check_unit(currency, "currency")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_PROGRAM_NAME):
        raise ValidationError(
            f"a program's name must be a string of at most {MAX_PROGRAM_NAME} characters"
        )


class ProgramService:
    """``ledger.programs``: programs, their funds, settings and low-balance thresholds."""

    def __init__(self, store: ItemStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._cache: dict[str, tuple[float, Program]] = {}
        self._lock = threading.Lock()
        self.threshold_listeners: list[ThresholdListener] = []

    def on_threshold_change(self, listener: ThresholdListener) -> None:
        """``listener`` runs after each :meth:`set_low_balance_threshold` (the
        notifications dismiss the LowBalance the new threshold makes untrue)."""
        self.threshold_listeners.append(listener)

    def create(
        self,
        program_id: str,
        *,
        name: str | None = None,
        currency: str = "USD",
        funds: Sequence[FundSpec] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> Program:
        """Create a program; ``funds`` default to points, cash, store_credit and bonus
        (the money ones in ``currency``). :class:`AlreadyExists` if it exists."""
        check_program(program_id, name=name, currency=currency)
        if settings is not None and not isinstance(settings, dict):
            raise ValidationError("a program's settings must be a mapping")
        if funds is not None and (
            not isinstance(funds, Sequence)
            or isinstance(funds, str)
            or not all(isinstance(f, FundSpec) for f in funds)
        ):
            raise ValidationError("funds must be a sequence of FundSpec")
        fund_specs = tuple(funds) if funds is not None else default_funds(currency)
        if not fund_specs:
            raise ValidationError("a program needs at least one fund")
        if len(fund_specs) > MAX_FUNDS:
            raise ValidationError(f"a program holds at most {MAX_FUNDS} funds")
        names = set()
        for f in fund_specs:
            check_fund(f.name)
            check_unit(f.unit)
            if f.name in names:
                raise ValidationError(f"fund {f.name} is defined twice")
            if not isinstance(f.allow_overdraft, bool):
                raise ValidationError(f"fund {f.name}: allow_overdraft must be true or false")
            check_threshold(f.low_balance_threshold)
            names.add(f.name)
        program = Program(
            id=program_id,
            name=name or program_id,
            currency=currency,
            funds=fund_specs,
            created_at=self.clock.now(),
            layout=LAYOUT,
            settings=settings or {},
        )
        try:
            self.store.transact_write(program_create(program))
        except ConditionFailed as exc:
            raise AlreadyExists(f"program {program_id} exists already") from exc
        self._remember(program)
        return program

    def get(self, program_id: str, *, fresh: bool = False) -> Program:
        """The program (cached a few seconds; ``fresh`` reads the store), or :class:`NotFound`."""
        check_id(program_id, "program id")
        if not fresh:
            with self._lock:
                cached = self._cache.get(program_id)
            if cached and time.monotonic() - cached[0] < CACHE_SECONDS:
                return cached[1]
        program = read_program(self.store, program_id)
        if program is None:
            raise NotFound(f"program {program_id} not found")
        self._remember(program)
        return program

    def list(self) -> list[str]:
        """Every program's id."""
        return program_ids(self.store)

    def update_settings(
        self, program_id: str, settings: dict[str, Any], *, layout: int | None = None
    ) -> Program:
        """Replace the program's settings (loyalty rules, notification rules, ...)."""
        if not isinstance(settings, dict):
            raise ValidationError("a program's settings must be a mapping")
        current = self.get(program_id, fresh=True)
        return self._store(replace(current, settings=settings, layout=layout or current.layout))

    def set_low_balance_threshold(
        self, program_id: str, fund: str, threshold: int | None
    ) -> Program:
        """Raise ``LowBalance`` when ``fund``'s available amount drops below ``threshold``
        (minor units; ``None`` stops it). Applies to postings from now on; an active
        ``LowBalance`` about the fund is dismissed by the listeners when the fund is
        at or above the new threshold, or the threshold is cleared. A listener's
        store error is raised after the threshold is stored: setting it again
        (the same call) finishes the dismissals."""
        check_threshold(threshold)
        current = self.get(program_id, fresh=True)
        if current.fund(fund) is None:
            raise NotFound(f"program {program_id} has no fund {fund!r}")
        funds = tuple(
            replace(f, low_balance_threshold=threshold) if f.name == fund else f
            for f in current.funds
        )
        updated = self._store(replace(current, funds=funds))
        for listener in self.threshold_listeners:
            listener(updated, fund)
        return updated

    def _store(self, updated: Program) -> Program:
        self.store.transact_write([program_replace(updated)])
        self._remember(updated)
        return updated

    def _remember(self, program: Program) -> None:
        with self._lock:
            self._cache[program.id] = (time.monotonic(), program)


def check_threshold(threshold: object) -> None:
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int)
        or not 0 <= threshold <= MAX_AMOUNT
    ):
        raise ValidationError(
            f"low_balance_threshold must be an integer from 0 to {MAX_AMOUNT} minor units"
        )

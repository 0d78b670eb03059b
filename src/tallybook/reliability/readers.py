"""Concurrent readers: check, while clients write, what must hold at every instant.

- Conservation: the ``tokens`` fund moves only by transfers between customer
  accounts, so its total over the accounts is constant. Reads of several items
  are not a snapshot, so a reader collects every head twice (one batch read
  each) and only judges when no ``tokens`` sequence number moved between the
  two collects: then the values held together at one instant in between
  (sequence numbers only grow), and their sum must be the seeded total.
- Bounds: every head read has ``held >= 0`` and ``available >= 0`` for funds
  without overdraft (invariant 2; one item is read atomically).
- History: a head, its fund's newest entry, the head again: when the fund's
  sequence did not move, the entry has that sequence and that balance.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tallybook.domain.model import FundState
from tallybook.ledger import Ledger
from tallybook.reliability.workload import TOKENS, Workload
from tallybook.store.records.ledger import read_heads


@dataclass
class ReaderLog:
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


class Reader:
    def __init__(self, ledger: Ledger, w: Workload, seed: int, stop: Any) -> None:
        self.ledger = ledger
        self.w = w
        self.rng = random.Random(seed)
        self.stop = stop
        self.log = ReaderLog()
        self.accounts = w.account_ids()
        program = ledger.programs.get(w.program)
        self.overdraft = {f.name for f in program.funds if f.allow_overdraft}

    def run(self, pause: float = 0.05) -> None:
        while not self.stop.is_set():
            try:
                self.conservation()
                self.history(self.rng.choice(self.accounts))
            except Exception as exc:  # a reader must not die silently
                self.log.violations.append(f"reader crashed: {type(exc).__name__}: {exc}")
                return
            self.stop.wait(pause)

    def _collect(self) -> dict[str, tuple[int, int]]:
        """account -> (tokens seq, tokens balance), one batch read; checks bounds on the way."""
        found: dict[str, tuple[int, int]] = {}
        for start in range(0, len(self.accounts), 100):
            chunk = self.accounts[start : start + 100]
            for acct in read_heads(self.ledger.store, self.w.program, chunk):
                self._bounds(acct.id, acct.funds)
                state = acct.fund(TOKENS)
                found[acct.id] = (state.seq, state.balance)
        return found

    def _bounds(self, account: str, funds: Mapping[str, FundState]) -> None:
        self.log.checks["bounds"] += 1
        for name, state in funds.items():
            held, available = state.held, state.available
            if held < 0:
                self.log.violations.append(f"invariant 2: {account}/{name} held {held} < 0")
            if available < 0 and name not in self.overdraft:
                self.log.violations.append(
                    f"invariant 2: {account}/{name} available {available} < 0 (seen live)"
                )

    def conservation(self) -> None:
        first = self._collect()
        second = self._collect()
        if {a: s for a, (s, _) in first.items()} != {a: s for a, (s, _) in second.items()}:
            self.log.checks["conservation_inconclusive"] += 1
            return
        self.log.checks["conservation"] += 1
        total = sum(b for _, b in second.values())
        if total != self.w.tokens_total:
            self.log.violations.append(
                f"invariant 5: tokens total {total} != {self.w.tokens_total} (live snapshot)"
            )

    def history(self, account: str) -> None:
        fund = self.rng.choice((TOKENS, "cash", "points"))
        before = self.ledger.accounts.get(self.w.program, account).fund(fund)
        page = self.ledger.accounts.history(self.w.program, account, fund, limit=1)
        after = self.ledger.accounts.get(self.w.program, account).fund(fund)
        if before.seq != after.seq:
            self.log.checks["history_inconclusive"] += 1
            return
        self.log.checks["history"] += 1
        entry = page.entries[0] if page.entries else None
        seq, balance = (entry.seq, entry.balance) if entry else (0, 0)
        if (seq, balance) != (after.seq, after.balance):
            self.log.violations.append(
                f"invariant 1: {account}/{fund}: head seq {after.seq} balance {after.balance}, "
                f"newest entry seq {seq} balance {balance} (live)"
            )

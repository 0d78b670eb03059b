"""The torture workload: clients running random operations with replays, Jepsen-bank style.

Each client (a thread) draws operations from a seeded RNG: earn, redeem,
transfer (of a conserved ``tokens`` fund or of cash), credit, hold, capture,
void and notify. With probability ``replay_rate`` it instead replays an
operation it completed earlier, with the same key and body, and expects a
replay. An ambiguous outcome (timeout, throttling, conflict, lost connection)
is retried with the same key until it is applied or rejected, or the client
gives up (counted; such keys are left out of the checks that need an answer).

What the checker needs is collected in :class:`ClientLog`: the keys
acknowledged (they must exist), the keys rejected (they must not), the
violations seen by clients, counts by kind and outcome.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tallybook.domain.model import FundSpec, default_funds
from tallybook.errors import AlreadyExists
from tallybook.ledger import Ledger
from tallybook.reliability.api import Ambiguous, Api, Broken, Op, Rejected
from tallybook.retry import RetryPolicy, retrying

TOKENS = "tokens"
TOKENS_EACH = 1_000
CASH_EACH = 100_000
NOTIFICATION_TYPES = ("Promo", "Reminder", "Survey")

#: relative weights of fresh operations
WEIGHTS: dict[str, int] = {
    "earn": 15,
    "redeem": 10,
    "transfer": 20,
    "credit": 8,
    "hold": 16,
    "capture": 10,
    "void": 8,
    "notify": 8,
}


class Stop(Protocol):
    def is_set(self) -> bool: ...


LOYALTY_RULES: dict[str, Any] = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "silver", "threshold": 500, "multiplier": 2},
        {"name": "gold", "threshold": 2000, "multiplier": 3},
    ],
    "expiry": {"days": 365, "warn_days": 30},
}


#: the client's retries of one operation (an ambiguous answer: the same key
#: again); in-process services and the engine retry within this same budget
CLIENT_RETRY = RetryPolicy(attempts=60, seconds=120.0, cap_seconds=0.5)


@dataclass(frozen=True, slots=True)
class Workload:
    program: str
    accounts: int = 12
    replay_rate: float = 0.1
    retry: RetryPolicy = CLIENT_RETRY

    def account_ids(self) -> list[str]:
        return [f"acct-{i:03d}" for i in range(self.accounts)]

    @property
    def tokens_total(self) -> int:
        return TOKENS_EACH * self.accounts


def setup(ledger: Ledger, w: Workload) -> None:
    """Create the program (default funds, cash with a low-balance threshold, a
    conserved ``tokens`` fund), loyalty rules and funded accounts; idempotent."""
    funds = [
        FundSpec(f.name, f.unit, low_balance_threshold=5_000 if f.name == "cash" else None)
        for f in default_funds()
    ]
    try:
        ledger.programs.create(w.program, funds=[*funds, FundSpec(TOKENS, TOKENS)])
    except AlreadyExists:
        # a rerun may continue a torture program; any other program is left
        # untouched (its loyalty rules would be replaced below)
        if ledger.programs.get(w.program).fund(TOKENS) is None:
            raise AlreadyExists(
                f"program {w.program} exists and was not made by torture (no {TOKENS!r} fund);"
                " torture writes to its program: give --program a new name"
            ) from None
    ledger.loyalty.configure(w.program, LOYALTY_RULES)
    for account in w.account_ids():
        ledger.accounts.open(w.program, account)
        ledger.transactions.credit(
            w.program, account, TOKENS, TOKENS_EACH, txn_id=f"seed-tokens-{account}"
        )
        ledger.wallet.credit(w.program, account, "cash", CASH_EACH, txn_id=f"seed-cash-{account}")


@dataclass
class ClientLog:
    """What clients saw; merged across threads and processes."""

    ops: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    acked: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def merge(self, other: ClientLog) -> None:
        self.ops.update(other.ops)
        self.outcomes.update(other.outcomes)
        self.acked += other.acked
        self.rejected += other.rejected
        self.violations += other.violations


class HoldPool:
    """Active holds any client may capture or void: (hold id, capture amount)."""

    def __init__(self) -> None:
        self._holds: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def add(self, hold_id: str, capture: int) -> None:
        with self._lock:
            self._holds.append((hold_id, capture))

    def take(self, rng: random.Random, share: float = 0.2) -> tuple[str, int] | None:
        """A random hold; with probability ``share`` it stays in the pool, so that
        clients race to capture or void the same hold."""
        with self._lock:
            if not self._holds:
                return None
            i = rng.randrange(len(self._holds))
            return self._holds[i] if rng.random() < share else self._holds.pop(i)


class Client:
    def __init__(
        self,
        name: str,
        api: Api,
        w: Workload,
        seed: int,
        pool: HoldPool,
        log: ClientLog,
        stop: Stop,
    ) -> None:
        self.name = name
        self.api = api
        self.w = w
        self.rng = random.Random(seed)
        self.pool = pool
        self.log = log
        self.stop = stop
        self.accounts = w.account_ids()
        self.done: list[Op] = []
        self.n = 0

    def run(self, count: int, tick: Callable[[int], None] = lambda _: None) -> None:
        for _ in range(count):
            if self.stop.is_set():
                return
            if self.done and self.rng.random() < self.w.replay_rate:
                self.replay(self.rng.choice(self.done))
            else:
                self.fresh(self.next_op())
            tick(1)

    def next_op(self) -> Op:
        self.n += 1
        kind = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        key = f"{self.name}-{self.n}"
        a = self.rng.choice(self.accounts)
        r = self.rng
        if kind in ("capture", "void"):
            taken = self.pool.take(r)
            if taken is None:
                kind = "hold"
            else:
                hold_id, capture = taken
                if kind == "capture":
                    return Op("capture", f"{hold_id}:capture", amount=capture, ref=hold_id)
                return Op("void", f"{hold_id}:void", ref=hold_id)
        match kind:
            case "earn":
                return Op("earn", f"order:{key}", a, amount=r.randint(100, 5_000), ref=key)
            case "redeem":
                return Op("redeem", key, a, amount=r.randint(1, 40))
            case "transfer":
                b = r.choice([x for x in self.accounts if x != a])
                fund = r.choice((TOKENS, TOKENS, "cash"))
                return Op("transfer", key, a, other=b, fund=fund, amount=r.randint(1, 50))
            case "credit":
                fund = r.choice(("cash", "store_credit"))
                return Op("credit", key, a, fund=fund, amount=r.randint(100, 2_000))
            case "notify":
                kind_ = r.choice(NOTIFICATION_TYPES)
                return Op("notify", None, a, other=kind_, amount=self.n, ref=key)
        # one hold in four lasts a second or two: captures and voids race its expiry
        expires_in = r.choice((1, 2, 3600, 3600, 3600, 3600, 3600, 3600))
        return Op("hold", key, a, amount=r.randint(1, 3_000), expires_in=expires_in)

    def fresh(self, op: Op) -> None:
        self.log.ops[op.kind] += 1
        replay = self.attempt(op)
        if replay is None:
            return
        if op.kind == "hold":
            self.pool.add(op.key or "", self.rng.randint(1, op.amount))
        self.done.append(op)
        if len(self.done) > 500:
            del self.done[: len(self.done) - 500]

    def replay(self, op: Op) -> None:
        self.log.ops["replay"] += 1
        replay = self.attempt(op, replaying=True)
        if replay is False:
            self.log.violations.append(
                f"invariant 3: replay of {op.kind} {op.key or op.ref} was applied again"
            )

    def attempt(self, op: Op, *, replaying: bool = False) -> bool | None:
        """Send ``op`` until answered; the replay flag, or None when rejected or abandoned."""
        with retrying(self.w.retry) as tries:
            for attempt in tries:
                if self.stop.is_set() and attempt:
                    self.log.outcomes["abandoned"] += 1
                    return None
                try:
                    replay = self.api.call(op)
                except Ambiguous as exc:
                    self.log.outcomes[f"retry:{exc.reason}"] += 1
                    continue
                except Rejected as exc:
                    self.log.outcomes[f"rejected:{exc.code}"] += 1
                    if replaying:
                        self.log.violations.append(
                            f"invariant 3: replay of {op.kind} {op.key} was rejected ({exc.code})"
                        )
                    elif op.key is not None:
                        self.log.rejected.append(op.key)
                    return None
                except Broken as exc:
                    self.log.outcomes["broken"] += 1
                    self.log.violations.append(str(exc))
                    return None
                self.log.outcomes["replayed" if replay else "applied"] += 1
                if op.key is not None and not replaying and not (op.kind == "void" and replay):
                    self.log.acked.append(op.key)
                return replay
        self.log.outcomes["gave_up"] += 1
        return None

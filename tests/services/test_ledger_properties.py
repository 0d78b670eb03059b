"""Random operation sequences against a simple in-memory model (invariants 1, 2, 3, 5).

Each hypothesis example runs in a fresh program of the engine's store: credits,
debits, transfers, adjustments, holds and releases, replays of earlier
transaction ids (same body: a replay; another body: a conflict) and clock
ticks. After every step the ledger's balances equal the model's; at the end
every fund's history equals the model's list of postings, ``check`` finds
nothing, and per unit the customers' total equals the net external flow.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tallybook.domain.model import FundSpec, Transaction
from tallybook.errors import IdempotencyConflict, InsufficientFunds, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.ledger.check import CheckService
from tallybook.services.ledger.postings import Plan, Snapshot

ACCOUNTS = ("a", "b", "c")
FUNDS = {"points": "points", "cash": "USD", "line": "USD"}
OVERDRAFT = {"line"}
EXAMPLES = {"memory": 40, "sqlite": 40, "dynamodb": 5}
MAX_OPS = {"memory": 40, "sqlite": 40, "dynamodb": 20}
_programs = itertools.count()

account = st.sampled_from(ACCOUNTS)
fund = st.sampled_from(sorted(FUNDS))
amount = st.integers(1, 500)
operation = st.one_of(
    st.tuples(st.just("credit"), account, fund, amount),
    st.tuples(st.just("debit"), account, fund, amount),
    st.tuples(st.just("transfer"), account, account, fund, amount),
    st.tuples(st.just("adjust"), account, fund, st.integers(-300, 300).filter(bool)),
    st.tuples(st.just("hold"), account, fund, amount),
    st.tuples(st.just("release"), account, fund, amount),
    st.tuples(st.just("replay"), st.integers(0, 1000)),
    st.tuples(st.just("conflict"), st.integers(0, 1000)),
    st.tuples(st.just("tick"), st.integers(1, 3600)),
)

Call = Callable[[Ledger, str, str, int], Transaction]


@dataclass
class Model:
    balance: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    held: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    postings: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))
    #: per unit, net amount that entered customer accounts from outside
    external: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: applied transactions: (txn id, how to call it again, amount)
    applied: list[tuple[str, Call, int]] = field(default_factory=list)

    def available(self, acct: str, f: str) -> int:
        return self.balance[(acct, f)] - self.held[(acct, f)]

    def can_take(self, acct: str, f: str, amount: int) -> bool:
        return f in OVERDRAFT or self.available(acct, f) >= amount

    def post(self, acct: str, f: str, amount: int) -> None:
        self.balance[(acct, f)] += amount
        self.postings[(acct, f)].append(amount)


def _hold(ledger: Ledger, program: str, acct: str, f: str, delta: int, txn_id: str) -> Transaction:
    def planner(snap: Snapshot) -> Plan:
        snap.account(acct)
        return Plan(type="authorize" if delta > 0 else "release", held={(acct, f): delta})

    body = {"op": "hold", "account": acct, "fund": f, "delta": delta}
    return ledger.engine.commit(program, txn_id, body, planner, lock=[acct])


def _calls(program: str) -> dict[str, Callable[..., Call]]:
    t = "transactions"
    return {
        "credit": lambda acct, f: (
            lambda led, tid, _, n: getattr(led, t).credit(program, acct, f, n, txn_id=tid)
        ),
        "debit": lambda acct, f: (
            lambda led, tid, _, n: getattr(led, t).debit(program, acct, f, n, txn_id=tid)
        ),
        "adjust": lambda acct, f: (
            lambda led, tid, _, n: getattr(led, t).adjust(program, acct, f, n, txn_id=tid)
        ),
        "hold": lambda acct, f: lambda led, tid, _, n: _hold(led, program, acct, f, n, tid),
        "release": lambda acct, f: lambda led, tid, _, n: _hold(led, program, acct, f, -n, tid),
    }


def _step(
    ledger: Ledger, clock: ManualClock, program: str, model: Model, op: tuple, n: int
) -> None:  # type: ignore[type-arg]
    kind = op[0]
    txn_id = f"x{n}"
    calls = _calls(program)
    if kind == "tick":
        clock.advance(timedelta(seconds=op[1]))
        return
    if kind in ("replay", "conflict"):
        if not model.applied:
            return
        old_id, call, old_amount = model.applied[op[1] % len(model.applied)]
        if kind == "replay":
            assert call(ledger, old_id, "", old_amount).replay
        else:
            other = old_amount + 1 if old_amount != -1 else -2
            with pytest.raises(IdempotencyConflict):
                call(ledger, old_id, "", other)
        return
    if kind == "transfer":
        _, src, dst, f, amt = op
        if src == dst:
            with pytest.raises(ValidationError):
                ledger.transactions.transfer(program, src, dst, f, amt, txn_id=txn_id)
            return
        call: Call = lambda led, tid, _, x: led.transactions.transfer(  # noqa: E731
            program, src, dst, f, x, txn_id=tid
        )
        if model.can_take(src, f, amt):
            call(ledger, txn_id, "", amt)
            model.post(src, f, -amt)
            model.post(dst, f, amt)
            model.applied.append((txn_id, call, amt))
        else:
            with pytest.raises(InsufficientFunds):
                call(ledger, txn_id, "", amt)
        return

    _, acct, f, amt = op
    call = calls[kind](acct, f)
    unit = FUNDS[f]
    if kind == "credit":
        ok, error = True, None
    elif kind in ("debit", "hold") or (kind == "adjust" and amt < 0):
        ok, error = model.can_take(acct, f, abs(amt)), InsufficientFunds
    elif kind == "release":
        ok, error = model.held[(acct, f)] >= amt, ValidationError
    else:  # positive adjustment
        ok, error = True, None
    if not ok:
        assert error is not None
        with pytest.raises(error):
            call(ledger, txn_id, "", amt)
        return
    txn = call(ledger, txn_id, "", amt)
    assert not txn.replay
    model.applied.append((txn_id, call, amt))
    if kind == "hold":
        model.held[(acct, f)] += amt
    elif kind == "release":
        model.held[(acct, f)] -= amt
    else:
        delta = -amt if kind == "debit" else amt
        model.post(acct, f, delta)
        model.external[unit] += delta


def _assert_matches(ledger: Ledger, program: str, model: Model) -> None:
    for acct in ACCOUNTS:
        head = ledger.accounts.get(program, acct)
        for f in FUNDS:
            state = head.fund(f)
            assert state.balance == model.balance[(acct, f)], (acct, f)
            assert state.held == model.held[(acct, f)], (acct, f)
            assert state.seq == len(model.postings[(acct, f)])
            if f not in OVERDRAFT:  # invariant 2
                assert state.available >= 0


@pytest.mark.unit  # the ledger service against a model: memory stands in for SQLite
def test_random_operation_sequences_keep_the_invariants(
    ledger: Ledger, clock: ManualClock, engine: str
) -> None:
    @settings(
        max_examples=EXAMPLES[engine],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=st.lists(operation, max_size=MAX_OPS[engine]))
    def run(ops: list[tuple]) -> None:  # type: ignore[type-arg]
        program = f"prop{next(_programs)}"
        ledger.programs.create(
            program,
            funds=[FundSpec(f, u, allow_overdraft=f in OVERDRAFT) for f, u in FUNDS.items()],
        )
        for acct in ACCOUNTS:
            ledger.accounts.open(program, acct)
        model = Model()
        for n, op in enumerate(ops):
            _step(ledger, clock, program, model, op, n)
            _assert_matches(ledger, program, model)

        for acct in ACCOUNTS:
            for f in FUNDS:
                entries = list(ledger.accounts.iter_history(program, acct, f))
                assert [e.amount for e in entries] == model.postings[(acct, f)]
                assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
        # the engine's own holds (no wallet hold rows): the ledger's invariants only,
        # not the wallet's (2 is the model's, asserted after every step)
        core = ledger.core
        check = CheckService(core.store, core.programs, core.accounts, core.transactions)
        report = check.program(program)
        assert report.ok, report.violations
        # invariant 5: customer totals move only by external flows
        totals: dict[str, int] = defaultdict(int)
        for (_, f), bal in model.balance.items():
            totals[FUNDS[f]] += bal
        for unit in set(FUNDS.values()):
            assert totals[unit] == model.external[unit]
            assert report.unit_totals.get(unit, 0) == 0

    run()

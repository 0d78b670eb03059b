"""Storage requests and capacity units per operation on DynamoDB Local.

The product (earn, redeem, balance read, hold + capture) against the two
reference designs, cost per earn at a short and a long history, and the
client's CPU time per storage call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.common import Json, Sizes
from bench.dynamo_product import PROGRAM, build_history, cost_of, drop, mean_cost, member
from bench.dynamo_product import open_ledger as open_product
from bench.dynamo_refs import ActiveFlag, Counter, HistoryInItem, RefClient
from tallybook.ledger import Ledger
from tallybook.store.port import StoreMetrics

Design = ActiveFlag | HistoryInItem
OPS = ("earn", "redeem", "balance", "hold_capture")


def _ref_cost(counter: Counter, op: Callable[[], object]) -> Json:
    counter.reset()
    t0 = time.perf_counter()
    op()
    ms = round((time.perf_counter() - t0) * 1000, 2)
    return {
        "requests": counter.requests,
        "rcu": counter.read_units,
        "wcu": counter.write_units,
        "ms": ms,
        "by_operation": {},
    }


def _product_ops(ledger: Ledger, account: str, i: int) -> dict[str, Callable[[], object]]:
    return {
        "earn": lambda: ledger.loyalty.earn(PROGRAM, account, f"o-{account}-{i}", 2500),
        "redeem": lambda: ledger.loyalty.redeem(
            PROGRAM, account, 10, "mug", txn_id=f"r-{account}-{i}"
        ),
        "balance": lambda: ledger.accounts.balances(PROGRAM, account),
        "hold_capture": lambda: (
            ledger.wallet.authorize(PROGRAM, account, 100, hold_id=f"h-{account}-{i}"),
            ledger.wallet.capture(PROGRAM, f"h-{account}-{i}"),
        ),
    }


def _ref_ops(design: Design, account: str, i: int) -> dict[str, Callable[[], object]]:
    return {
        "earn": lambda: design.earn(account, 25, f"o-{i}"),
        "redeem": lambda: design.redeem(account, 10, f"r-{i}"),
        "balance": lambda: design.balance(account),
        "hold_capture": lambda: (
            design.authorize(account, 1, f"h-{i}"),
            design.capture(account, f"h-{i}"),
        ),
    }


def _fresh(ledger: Ledger) -> Callable[[], object]:
    return lambda: ledger.programs.get(PROGRAM, fresh=True)


def per_operation(ledger: Ledger, ref: RefClient, sizes: Sizes) -> Json:
    member(ledger, "m", cash=10**9)
    designs: dict[str, Design] = {"a": ActiveFlag(ref), "b": HistoryInItem(ref)}
    for name, design in designs.items():
        design.earn(f"m{name}", 10**6, "seed")  # an account with a previous entry
    out: Json = {}
    for op in OPS:
        prod = [
            cost_of(ledger.store.metrics, _fresh(ledger), _product_ops(ledger, "m", i)[op])
            for i in range(sizes.ddb_repeats)
        ]
        row: Json = {"product": mean_cost(prod)}
        for name, design in designs.items():
            samples = [
                _ref_cost(ref.counter, _ref_ops(design, f"m{name}", i)[op])
                for i in range(sizes.ddb_repeats)
            ]
            row[f"baseline_{name}"] = mean_cost(samples)
        out[op] = row
    return out


def history(ledger: Ledger, ref: RefClient, sizes: Sizes) -> Json:
    """Cost per earn at history length 10 and ``long``: product against design (b)."""
    lengths = (10, sizes.long_history)
    out: Json = {"lengths": list(lengths), "product": {}, "baseline_b": {}}
    for n in lengths:
        account = f"long{n}"
        build_history(ledger, account, n)
        ledger.loyalty.earn(PROGRAM, account, f"enrol-{account}", 1000)
        samples = [
            cost_of(
                ledger.store.metrics,
                _fresh(ledger),
                partial(ledger.loyalty.earn, PROGRAM, account, f"x{n}-{i}", 2500),
            )
            for i in range(sizes.ddb_repeats)
        ]
        out["product"][str(n)] = mean_cost(samples)
    design = HistoryInItem(ref)
    steps = sorted({10, 100, 1000, sizes.long_history} if not sizes.quick else set(lengths))
    for n in steps:
        try:
            design.fill(f"b{n}", n)
        except Exception as exc:  # the 400 KB item limit, reported as a figure
            out["baseline_b"][str(n)] = {"error": _error(exc)}
            continue
        earn = _ref_cost(ref.counter, partial(design.earn, f"b{n}", 25, "x"))
        earn["balance_rcu"] = _ref_cost(ref.counter, partial(design.balance, f"b{n}"))["rcu"]
        out["baseline_b"][str(n)] = earn
    return out


def _error(exc: Exception) -> str:
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Message", exc))[:200]
    return str(exc)[:200]


def cpu_per_call(ledger: Ledger, ref: RefClient, sizes: Sizes) -> Json:
    """Client CPU (``time.process_time``) over a batch of calls / storage requests."""
    member(ledger, "cpu")
    metrics: StoreMetrics = ledger.store.metrics
    metrics.reset()
    cpu0 = time.process_time()
    for i in range(sizes.cpu_calls):
        ledger.loyalty.earn(PROGRAM, "cpu", f"cpu-{i}", 2500)
        ledger.accounts.balances(PROGRAM, "cpu")
    product_cpu = time.process_time() - cpu0
    design = ActiveFlag(ref)
    ref.counter.reset()
    cpu0 = time.process_time()
    for i in range(sizes.cpu_calls):
        design.earn("cpu", 25, f"cpu-{i}")
        design.balance("cpu")
    ref_cpu = time.process_time() - cpu0
    return {
        "product_us": round(product_cpu / metrics.requests * 1e6, 1),
        "product_requests": metrics.requests,
        "baseline_a_us": round(ref_cpu / ref.counter.requests * 1e6, 1),
        "baseline_a_requests": ref.counter.requests,
    }


def run(endpoint: str, sizes: Sizes) -> Json:
    ledger = open_product(endpoint)
    ref = RefClient(endpoint)
    try:
        return {
            "operations": per_operation(ledger, ref, sizes),
            "history": history(ledger, ref, sizes),
            "cpu_per_storage_call": cpu_per_call(ledger, ref, sizes),
        }
    finally:
        drop(ledger)
        ref.drop()

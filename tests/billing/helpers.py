"""Shared pieces of the billing tests: an aligned clock, report readers and the
set-up of a property test's examples."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

MIN = timedelta(minutes=1)
_programs = itertools.count()


def aligned_start(clock: ManualClock) -> datetime:
    """The top of the hour after the clock's time; the clock is moved there."""
    now = clock.now().astimezone(UTC)
    t0 = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    clock.set(t0)
    return t0


def record(
    rid: str, at: datetime, *, partner: str = "acme", amount: int = 1000, rate: str = "0.05"
) -> dict[str, Any]:
    return {
        "id": rid,
        "partner": partner,
        "order_id": f"o-{rid}",
        "amount": amount,
        "currency": "USD",
        "rate": rate,
        "time": at.isoformat(),
    }


def ingest(ledger: Ledger, rid: str, at: datetime, **kw: Any) -> Any:
    r = record(rid, at, **kw)
    return ledger.billing.ingest(
        "shop",
        r["id"],
        partner=r["partner"],
        order_id=r["order_id"],
        amount=r["amount"],
        currency=r["currency"],
        rate=r["rate"],
        time=at,
    )


def billing_docs(out: Path, program: str = "shop") -> dict[str, dict[str, Any]]:
    """window name -> billing.json content, for every billing report under ``out``."""
    base = out / program / "billing"
    if not base.exists():
        return {}
    return {d.name: json.loads((d / "billing.json").read_text()) for d in sorted(base.iterdir())}


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def examples(n: int) -> settings:
    """Settings of a property test whose ``n`` examples share its function-scoped
    ledger and clock (each example makes its own program, :func:`new_program`): no
    deadline, and neither that sharing nor a slow example is a failed health check."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def new_program(
    ledger: Ledger, clock: ManualClock, prefix: str, *, days_on: int
) -> tuple[str, datetime]:
    """A program of its own for one example, and the example's start: the clock moved
    to a fresh hour ``days_on`` days on, past every window the example before used."""
    program = f"{prefix}{next(_programs)}"
    ledger.programs.create(program)
    clock.set(clock.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=days_on))
    return program, clock.now()

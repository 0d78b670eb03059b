"""Shared pieces of the billing tests: an aligned clock and report readers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

MIN = timedelta(minutes=1)


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

"""The rewards-issued report against the loyalty ledger's own history: whatever
members earn (tier multipliers, campaign bonuses), redeem and let expire (by the
job, or as they come back), per partner, the reported issued, redeemed and
expired points and entry counts equal what their history says."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.model import EXPIRY, ISSUANCE, REDEMPTION
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock

from .helpers import MIN, examples, new_program

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

EXAMPLES = {"memory": 25, "sqlite": 25, "dynamodb": 3}
MEMBERS = ("m1", "m2")

operation = st.tuples(
    st.sampled_from(["earn", "earn", "redeem", "expire"]),
    st.sampled_from(MEMBERS),
    st.sampled_from(["acme", "zeta", ""]),
    st.integers(100, 20_000),  # an order's amount, or the share of points to redeem
    st.integers(1, 36 * 60),  # minutes before the next operation (lots live a day)
)


def _reported(out: Path, program: str) -> dict[str, list[int]]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    base = out / program / "rewards"
    for folder in sorted(base.iterdir()) if base.exists() else []:
        for t in json.loads((folder / "rewards_issued.json").read_text())["totals"]:
            row = totals[t["partner"]]
            for n, key in enumerate(("issued", "redeemed", "expired", "entries")):
                row[n] += t[key]
    return dict(totals)


def _from_history(ledger: Ledger, program: str) -> dict[str, list[int]]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for member in MEMBERS:
        for entry in ledger.accounts.iter_history(program, member, "points"):
            txn = ledger.transactions.get(program, entry.txn_id)
            against = {leg.account for leg in txn.legs} & {ISSUANCE, REDEMPTION, EXPIRY}
            if not against:
                continue
            row = totals[txn.metadata.get("partner", "")]
            if ISSUANCE in against:
                row[0] += entry.amount
            elif REDEMPTION in against:
                row[1] -= entry.amount
            else:
                row[2] -= entry.amount
            row[3] += 1
    return dict(totals)


@pytest.mark.slow
def test_rewards_report_equals_the_loyalty_history_per_partner(
    ledger: Ledger, clock: ManualClock, engine: str, tmp_path: Path
) -> None:
    @examples(EXAMPLES[engine])
    @given(ops=st.lists(operation, min_size=1, max_size=20))
    def run(ops: list[tuple[Any, ...]]) -> None:
        program, t0 = new_program(ledger, clock, "rwdp", days_on=5)
        ledger.billing.configure(program, grace_minutes=1, start=t0)
        ledger.loyalty.configure(
            program,
            {
                "expiry": {"days": 1},
                "tiers": [
                    {"name": "base", "threshold": 0},
                    {"name": "gold", "threshold": 300, "multiplier": "1.5"},
                ],
                "campaigns": [
                    {
                        "id": "launch",
                        "starts": t0.isoformat(),
                        "ends": (t0 + 24 * 60 * MIN).isoformat(),
                        "multiplier": "2",
                        "bonus": 7,
                    }
                ],
            },
        )
        for member in MEMBERS:
            ledger.accounts.open(program, member)
        for n, (kind, member, partner, amount, wait) in enumerate(ops):
            clock.advance(MIN)
            metadata = {"partner": partner} if partner else None
            if kind == "earn":
                ledger.loyalty.earn(program, member, f"o{n}", amount, metadata=metadata)
            elif kind == "redeem":
                points = ledger.loyalty.status(program, member).balance * amount // 20_000
                if points:
                    ledger.loyalty.redeem(
                        program, member, points, "gift", txn_id=f"r{n}", metadata=metadata
                    )
            else:
                ledger.loyalty.expire(program)
            clock.advance(wait * MIN)
        clock.advance(3 * 24 * 60 * MIN)
        ledger.loyalty.expire(program)  # every lot left is past its day
        clock.advance(2 * 24 * 60 * MIN)  # the day of that expiry is over
        out = tmp_path / "out"
        ledger.billing.reports.run(
            program, sink=DirectorySink(out), interval="1d", kinds=["rewards"]
        )
        assert _reported(out, program) == _from_history(ledger, program)

    run()

"""Loyalty's lots and member state against each other, for ``ledger.check``, from
what its one read of an account already holds (the lots ride on the earns'
entries, the member state on the head) plus one key read for the member's tier.

Lots are consumed as a prefix in earning order, so the member state's counters
say all there is (docs/loyalty.md): lot *i* covers ``(cum_end - amount,
cum_end]`` and ``lots_used`` counts what is gone. Checked:

- every lot's amount is its earn entry's amount;
- the lots cover ``(0, lots_earned]`` end to end, without a gap or an overlap;
- ``lifetime`` (points earned for ever) is ``lots_earned``: every earn of
  points forms its lot, and nothing else adds to either;
- ``0 <= lots_used <= lots_earned``;
- a member with a tier has their row among that tier's members.

Not checked, as no invariant ties them: what the lots have left
(``lots_earned - lots_used``) against the points balance (plain credits and
debits move the balance and leave the lots alone), and the tier against the
points (a downgrade waits for its rule and the job, and a rules change applies
at a member's next event); nor whether a member also has rows in other tiers
(one key read per tier and member).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tallybook.domain.model import Account, Entry
from tallybook.domain.tiers import MemberState


def lot_problems(
    account: Account, lots: Sequence[tuple[Entry, int, int]], in_tier: Callable[[str], bool]
) -> list[str]:
    """What is wrong with ``account``'s lots (each with its entry, ``cum_end`` and
    ``lot_amount``) and member state; ``in_tier(tier)`` reads whether the account
    is among the tier's members."""
    raw = account.attributes.get("loyalty")
    if raw is None and not lots:
        return []
    where = f"loyalty: {account.id}"
    try:
        state = MemberState.from_value(raw)
    except (TypeError, ValueError, AttributeError) as exc:
        return [f"{where}: malformed member state on its head ({exc})"]
    problems = []
    end = 0
    for entry, cum_end, amount in sorted(lots, key=lambda lot: lot[1]):
        lot = f"{where}: lot of {entry.txn_id} ({entry.fund} seq {entry.seq})"
        if amount != entry.amount:
            problems.append(f"{lot}: lot_amount {amount} != its entry's amount {entry.amount}")
        if cum_end - amount != end:
            problems.append(f"{lot}: starts at {cum_end - amount}, the lots before end at {end}")
        end = cum_end
    if state.lots_earned != end:
        problems.append(f"{where}: lots_earned {state.lots_earned} != the lots' end {end}")
    if state.lifetime != state.lots_earned:
        problems.append(f"{where}: lifetime {state.lifetime} != lots_earned {state.lots_earned}")
    if not 0 <= state.lots_used <= state.lots_earned:
        problems.append(
            f"{where}: lots_used {state.lots_used} is not between 0 and lots_earned "
            f"{state.lots_earned}"
        )
    if state.tier is not None and not isinstance(state.tier, str):
        problems.append(f"{where}: tier {state.tier!r} is not text")
    elif state.tier is not None and not in_tier(state.tier):
        problems.append(f"{where}: in tier {state.tier} but not among its members")
    return problems

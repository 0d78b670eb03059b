"""Tiers: the tier decision inside a posting plan, the TierChanged event, and the
tier reads (a member's status, their tier history, members of a tier).

A tier change is written in the same transaction as the earn, redeem, expiry or
review that causes it: the member state in the head, the membership row of the
new tier (and the removal of the old one, store/records/loyalty.py) and a
history row ``TL#...``. A posting that changes no tier writes no membership.
When tiers count the balance, a plain credit, debit, adjustment or transfer of
a member's points changes their tier the same way (:func:`posting_tiers`,
which the composition root hands the posting engine with :func:`attach`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import cast

from tallybook.domain.ids import check_id, is_system_account
from tallybook.domain.loyalty import LoyaltyConfig
from tallybook.domain.model import Account, Transaction
from tallybook.domain.tiers import (
    MemberState,
    TierDecision,
    decide_tier,
    last_qualified,
    lots_may_be_due,
    qualifying_points,
)
from tallybook.errors import NotFound
from tallybook.services.events import EventBus, LedgerEvent
from tallybook.services.ledger.accounts import check_limit
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Committed, Plan, PostingEngine, Snapshot
from tallybook.services.loyalty.lots import expiring_lots
from tallybook.services.loyalty.pages import standings
from tallybook.services.loyalty.values import (
    MemberPage,
    MemberStatus,
    TierChange,
    TierChangePage,
    config_of,
)
from tallybook.store.port import Value
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records.codec import LAYOUT, iso
from tallybook.store.records.loyalty import (
    ExpiringLot,
    members_page,
    membership_moves,
    tier_change_put,
    tier_changes_page,
)


def apply_tier(
    plan: Plan,
    snap: Snapshot,
    cfg: LoyaltyConfig,
    account: str,
    before: MemberState,
    state: MemberState,
    balance: int,
    txn_id: str,
    reason: str,
    *,
    held_until: datetime | None = None,
) -> TierDecision:
    """Decide the member's tier and add the state, index and history writes to ``plan``.

    ``before`` is the member's state as the head holds it, ``state`` and
    ``balance`` what this posting leaves; ``held_until``, when the standing
    before it ended earlier than now (points that expired at their date)."""
    qualifying = qualifying_points(cfg, state, snap.now, balance)
    # the standing before this posting held until now (or held_until): the hold
    # runs from there
    held_balance = snap.account(account).fund(cfg.fund).balance
    held = last_qualified(cfg, before, held_balance, held_until or snap.now)
    decision = decide_tier(cfg, state, qualifying, snap.now, held)
    new_state = replace(state, tier=decision.tier, qualified_at=decision.qualified_at)
    plan.attrs[account] = {"loyalty": cast(Value, new_state.to_value())}
    if decision.changed:
        plan.actions += membership_moves(
            snap.program.id, account, decision.previous, decision.tier, iso(snap.now)
        )
        change = TierChange(snap.now, decision.previous, decision.tier, reason, txn_id)
        plan.actions.append(tier_change_put(snap.program.id, account, change))
    plan.details["tier_changed"] = decision.changed
    return decision


def tier_now(cfg: LoyaltyConfig, state: MemberState, acct: Account, now: datetime) -> str:
    """The tier the rules give the member at ``now``, before the posting at hand: the
    stored one, or a lower one once a downgrade is due that no job has applied yet
    (an order is rewarded at the tier the member holds when it is placed). Before
    their first earn, the base tier (the first earn enrols them)."""
    if state.tier is None:
        return cfg.base_tier.name
    balance = acct.fund(cfg.fund).balance
    qualifying = qualifying_points(cfg, state, now, balance)
    held = last_qualified(cfg, state, balance, now)
    return decide_tier(cfg, state, qualifying, now, held).tier


def stopped_qualifying(
    cfg: LoyaltyConfig,
    state: MemberState,
    balance: int,
    lots: list[tuple[int, datetime | None]],
) -> datetime | None:
    """With balance-based tiers, when a ``balance`` counting the points of ``lots``
    past their date (points, date; oldest first) fell below the member's tier's
    threshold: points past their date never count, however late they expire.
    None when it did not (or tiers count earned points)."""
    if cfg.qualification.basis != "balance" or state.tier is None:
        return None
    threshold = cfg.tier(state.tier).threshold
    for points, expires in lots:
        balance -= points
        if points and balance < threshold:
            return expires
    return None


def posting_tiers(snap: Snapshot, plan: Plan, txn_id: str) -> None:
    """When tiers count the balance, keep them right as a posting that is not
    loyalty's own (a credit, debit, adjustment, transfer, raw posting) moves a
    member's points: an upgrade at once, a downgrade by the rule, and the moment
    the member stops meeting their tier's threshold (an ``after_hold`` runs from
    there). Written in the posting's transaction; nothing when no tier moves."""
    raw = snap.program.settings.get("loyalty")
    if not isinstance(raw, Mapping) or snap.program.layout < LAYOUT:
        return
    qualification = raw.get("qualification")
    if not isinstance(qualification, Mapping) or qualification.get("basis") != "balance":
        return  # earned points count: only earns (and rolling months) move them
    fund = raw.get("fund", "points")
    moved: dict[str, int] = {}
    for leg in plan.legs:
        if leg.fund != fund or is_system_account(leg.account):
            continue
        if "loyalty" in plan.attrs.get(leg.account, {}):
            continue  # an earn, redeem, expiry or review: decides the tier itself
        moved[leg.account] = moved.get(leg.account, 0) + leg.amount
    moved = {account: delta for account, delta in moved.items() if delta}
    if not moved:
        return
    cfg = config_of(snap.program)
    snap.preload(list(moved))
    changes: dict[str, Value] = {}
    for account, delta in moved.items():
        acct = snap.account(account)
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        if state.tier is None:
            continue  # not a member: enrols with their first earn
        before = counted = acct.fund(cfg.fund).balance
        held_at = snap.now
        if lots_may_be_due(state, snap.now):
            # points past their date count for nothing, whether expired yet or not,
            # and a hold runs from the date they stopped counting
            due = [(lot.points, lot.expires) for lot in _overdue(snap, cfg, account, state, acct)]
            held_at = stopped_qualifying(cfg, state, before, due) or snap.now
            counted -= sum(points for points, _ in due)
        qualifying = qualifying_points(cfg, state, snap.now, counted + delta)
        held = last_qualified(cfg, state, before, held_at)
        decision = decide_tier(cfg, state, qualifying, snap.now, held)
        threshold = cfg.tier(state.tier).threshold
        stops_meeting = qualifying < threshold <= max(counted, 0)
        if not decision.changed and not stops_meeting:
            continue
        new_state = replace(state, tier=decision.tier, qualified_at=decision.qualified_at)
        plan.attrs[account] = {
            **plan.attrs.get(account, {}),
            "loyalty": cast(Value, new_state.to_value()),
        }
        if decision.changed:
            plan.actions += membership_moves(
                snap.program.id, account, decision.previous, decision.tier, iso(snap.now)
            )
            change = TierChange(snap.now, decision.previous, decision.tier, str(plan.type), txn_id)
            plan.actions.append(tier_change_put(snap.program.id, account, change))
            changes[account] = {"previous": decision.previous, "tier": decision.tier}
    if not changes:
        return
    plan.details["tier_changed"] = True
    plan.details["tier_changes"] = changes
    if len(changes) == 1:
        [only] = changes.values()
        only = cast(dict[str, Value], only)
        plan.details.update({"tier": only["tier"], "previous_tier": only["previous"]})


def _overdue(
    snap: Snapshot, cfg: LoyaltyConfig, account: str, state: MemberState, acct: Account
) -> list[ExpiringLot]:
    """The member's lots past their date as the expiry job (or their next loyalty
    operation) will expire them: oldest first, at most what is available."""
    available = acct.fund(cfg.fund).available
    return expiring_lots(snap.store, snap.program.id, cfg.fund, account, state, snap.now, available)


def attach(engine: PostingEngine, events: EventBus) -> None:
    """Hand :func:`posting_tiers` to the engine and raise TierChanged for the tier
    changes it writes (the composition root, ``tallybook.Ledger``, does this once)."""

    def on_committed(event: Committed) -> None:
        txn = event.transaction
        changes = txn.details.get("tier_changes")
        if not isinstance(changes, dict):
            return
        for account, change in changes.items():
            payload = {"previous": change["previous"], "tier": change["tier"], "txn_id": txn.id}
            events.publish(
                LedgerEvent(txn.program, account, "TierChanged", payload, source_id=txn.id)
            )

    engine.amend(posting_tiers)
    engine.subscribe(on_committed)


def announce(core: LedgerCore, txn: Transaction, account: str) -> None:
    """Raise TierChanged for a change, except first enrolment into the base tier.

    A replay raises it again only while its change is the member's latest (one
    read of the tier history): what a crash after the first commit lost comes
    back with the retry, once (the event's key is the transaction id), and an
    older change never supersedes a newer one."""
    d = txn.details
    if not d.get("tier_changed"):
        return
    base = config_of(core.programs.get(txn.program)).base_tier.name
    if d.get("previous_tier") is None and d["tier"] == base:
        return
    if txn.replay:
        latest, _ = tier_changes_page(core.store, txn.program, account, limit=1, cursor=None)
        if not latest or latest[0].txn_id != txn.id:
            return
    core.events.publish(
        LedgerEvent(
            txn.program,
            account,
            "TierChanged",
            {"previous": d.get("previous_tier"), "tier": d["tier"], "txn_id": txn.id},
            source_id=txn.id,
            occurred_at=txn.created_at,
        )
    )


def member_status(core: LedgerCore, cfg: LoyaltyConfig, acct: Account) -> MemberStatus:
    """A member's tier, qualifying points and balance, from their account head."""
    state = MemberState.from_value(acct.attributes.get("loyalty"))
    fund = acct.fund(cfg.fund)
    now = core.clock.now()
    qualifying = qualifying_points(cfg, state, now, fund.balance)
    tier = cfg.tier(tier_now(cfg, state, acct, now))  # a due downgrade counts already
    rank = cfg.rank(tier.name)
    nxt = cfg.tiers[rank + 1] if rank + 1 < len(cfg.tiers) else None
    return MemberStatus(
        account=acct.id,
        tier=tier.name,
        qualifying_points=qualifying,
        balance=fund.balance,
        available=fund.available,
        lifetime_points=state.lifetime,
        qualified_at=state.qualified_at,
        next_tier=nxt.name if nxt else None,
        points_to_next_tier=max(0, nxt.threshold - qualifying) if nxt else None,
    )


def tier_history(
    core: LedgerCore, program: str, account: str, *, limit: int = 50, cursor: str | None = None
) -> TierChangePage:
    """Every tier change of a member, newest first; an unknown member is NotFound."""
    check_id(account, "account")
    check_limit(limit)
    listing = ("tier-history", program, account)
    start = unbind_cursor(cursor, *listing)
    changes, after = tier_changes_page(core.store, program, account, limit=limit, cursor=start)
    if not changes and cursor is None:
        core.accounts.get(program, account)  # an unknown member is a 404, not []
    return TierChangePage(changes, bind_cursor(after, *listing))


def tier_members(
    core: LedgerCore, program: str, tier: str, *, limit: int = 100, cursor: str | None = None
) -> MemberPage:
    """Members of ``tier``, one page at a time (membership rows, strongly consistent)."""
    cfg = config_of(core.programs.get(program))
    if all(t.name != tier for t in cfg.tiers):
        raise NotFound(f"program {program} has no tier {tier!r}")
    check_limit(limit)
    listing = ("tier-members", program, tier)
    start = unbind_cursor(cursor, *listing)
    accounts, after = members_page(core.store, program, tier, limit=limit, cursor=start)
    now = core.clock.now()
    return MemberPage(
        accounts, bind_cursor(after, *listing), standings(core.store, program, cfg, accounts, now)
    )

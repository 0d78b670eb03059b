"""Loyalty: earn for orders, redeem for rewards, tiers, lots and expiry.

Storage (all in the single table, see store/keys.py):

- the program's rules: ``settings["loyalty"]`` of the program item;
- a member's state (tier, qualifying totals, lot counters): ``attrs["loyalty"]``
  of the account head, written with every earn/redeem/expiry, so each is one
  read of the head plus one transaction, whatever the account's history;
- tier membership: one row per member and tier, written when the tier changes
  (members by tier, page by page; see store/records/loyalty.py);
- lots: fields of the earn's history entry, indexed by expiry day on gsi2 for
  the expiry job (no item of their own; store/records/loyalty.py);
- tier history: ``TL#{time}#{txn}`` rows, written in the transaction that
  changes the tier.

An earn's transaction id is ``order:{order_id}``: earning an order twice
replays the first result, and looking an order up is a single get.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from tallybook.domain.ids import check_client_txn_id, check_id, check_progress
from tallybook.domain.loyalty import LoyaltyConfig, decimal_text, parse_config, quote
from tallybook.domain.model import ISSUANCE, REDEMPTION, Account, Leg, Transaction, TxnType
from tallybook.domain.money import MAX_AMOUNT, check_amount
from tallybook.domain.postings import check_metadata
from tallybook.domain.tiers import (
    MemberState,
    lot_expiry,
    record_earn,
)
from tallybook.domain.times import check_optional_time, check_time_range
from tallybook.domain.wallet import SPEND_ORDER
from tallybook.errors import (
    ConditionFailed,
    ConfigError,
    IdempotencyConflict,
    InsufficientFunds,
    NotFound,
    ValidationError,
)
from tallybook.services.ledger.accounts import check_limit
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.ledger.transactions import body_of
from tallybook.services.loyalty.jobs import (
    ExpiryJob,
    ExpiryReport,
    Progress,
    ReviewReport,
    review_tiers,
    settled_head,
)
from tallybook.services.loyalty.lots import LotsDue, Settled
from tallybook.services.loyalty.pages import ExpiringPage, expiring_page
from tallybook.services.loyalty.tiers import (
    announce,
    apply_tier,
    member_status,
    tier_history,
    tier_members,
    tier_now,
)
from tallybook.services.loyalty.values import (
    MAX_ORDER_ID,
    ORDER_PREFIX,
    EarnResult,
    MemberPage,
    MemberStatus,
    OrderLookup,
    RedeemResult,
    TierChange,
    TierChangePage,
    config_of,
    load_toml,
    lot_time,
    order_txn_id,
    scoped_txn_id,
)
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records import loyalty as lot_records
from tallybook.store.records.codec import LAYOUT, iso

__all__ = [
    "MAX_ORDER_ID",
    "ORDER_PREFIX",
    "EarnResult",
    "LoyaltyService",
    "MemberPage",
    "MemberStatus",
    "OrderLookup",
    "RedeemResult",
    "TierChange",
    "TierChangePage",
    "config_of",
    "load_toml",
    "order_txn_id",
    "scoped_txn_id",
]


#: an order dated further ahead than this is refused (a clock or unit error), as a
#: billing record is
MAX_ORDER_AHEAD = timedelta(days=1)


class LoyaltyService:
    """``ledger.loyalty``: earn rules, redeem, tiers and point expiry (docs/loyalty.md)."""

    def __init__(self, core: LedgerCore) -> None:
        self.core = core
        self.store = core.store

    # -- configuration ------------------------------------------------------

    def configure(
        self, program_id: str, config: LoyaltyConfig | Mapping[str, Any]
    ) -> LoyaltyConfig:
        """Validate and store a program's loyalty rules (other settings are kept)."""
        cfg = config if isinstance(config, LoyaltyConfig) else parse_config(config)
        program = self.core.programs.get(program_id, fresh=True)
        spec = program.fund(cfg.fund)
        if spec is None:
            raise ConfigError(f"fund: program {program_id} has no fund {cfg.fund!r}")
        if cfg.fund in SPEND_ORDER:  # earned points there would break the wallet's rules
            raise ConfigError(
                f"fund: {cfg.fund} is a wallet fund (bonus grants, store credit, cash): "
                "points need a fund of their own, such as points"
            )
        if cfg.earn.currency is not None and cfg.earn.currency != program.currency:
            raise ConfigError(
                f"earn.currency: {cfg.earn.currency} differs from the program's currency "
                f"{program.currency}"
            )
        if program.layout < LAYOUT and "loyalty" in program.settings:
            config_of(program)  # refuses: its loyalty data is in the older layout
        settings = {**program.settings, "loyalty": cfg.to_settings()}
        # a program without loyalty data yet starts it in the current layout
        self.core.programs.update_settings(program_id, settings, layout=LAYOUT)
        # no lot can expire before the rules exist: the expiry job starts here
        # rather than at the program's creation (never moves an existing one)
        yesterday = (self.core.clock.now() - timedelta(days=1)).date()
        with contextlib.suppress(ConditionFailed):
            self.store.transact_write(
                [lot_records.expiry_checkpoint_put(program_id, yesterday, first=True)]
            )
        return cfg

    def config(self, program_id: str) -> LoyaltyConfig:
        """The program's loyalty rules: NotFound when it has none (what is asked for
        does not exist; the commands that need them refuse with a ConfigError)."""
        program = self.core.programs.get(program_id)
        if program.settings.get("loyalty") is None:
            raise NotFound(
                f"program {program_id} has no loyalty configuration; load one with "
                "'tallybook loyalty config load FILE.toml'"
            )
        return config_of(program)

    # -- earn and redeem ----------------------------------------------------

    def earn(
        self,
        program: str,
        account: str,
        order_id: str,
        amount: int,
        *,
        currency: str | None = None,
        at: datetime | None = None,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> EarnResult:
        """Points for an order, exactly once per ``order_id``.

        ``amount`` is in minor units of ``currency`` (default: the program's);
        ``at`` is when the order was placed (default: now) and selects the
        campaigns that apply. A second earn of the same order with the same
        request returns the first result (``replay`` set); another request
        body under the same order id is an ``IdempotencyConflict``.
        """
        check_id(account, "account")
        amount = check_amount(amount)
        at = check_optional_time(at, "at")
        if at is not None:
            check_time_range(at, "at")
        txn_id = order_txn_id(order_id)
        meta = check_metadata(metadata) or None

        def body_with(cur: str | None) -> dict[str, Any]:
            return body_of(
                op="earn",
                account=account,
                order_id=order_id,
                amount=amount,
                currency=cur,
                at=iso(at) if at else None,
                description=description,
                metadata=meta,
            )

        def plan(snap: Snapshot) -> Plan:
            cfg = config_of(snap.program)
            expected = cfg.earn.currency or snap.program.currency
            if currency is not None and currency != expected:
                raise ValidationError(f"orders earn points in {expected}, not {str(currency)[:40]}")
            if at is not None and at > snap.now + MAX_ORDER_AHEAD:  # picks the campaigns
                raise ValidationError(
                    f"order {order_id} is dated more than a day ahead ({iso(at)}): "
                    "at is when the order was placed"
                )
            acct = snap.account(account)
            state = settled.state(MemberState.from_value(acct.attributes.get("loyalty")), snap.now)
            q = quote(cfg, amount, tier=tier_now(cfg, state, acct, snap.now), at=at or snap.now)
            if q.points > MAX_AMOUNT:  # the leg's own check would blame the order's amount
                raise ValidationError(
                    f"order {order_id} would earn {q.points} points, more than the maximum "
                    f"of {MAX_AMOUNT} in one transaction"
                )
            new_state = record_earn(cfg, state, q.points, snap.now)
            p = Plan(
                type=TxnType.EARN,
                order_id=order_id,
                index_order=False,  # the transaction id is the order's: found by key
                owner=account,
                allow_empty=True,
                description=description,
                metadata=dict(metadata or {}),
            )
            expires: str | None = None
            if q.points > 0:
                p.legs = [Leg(account, cfg.fund, q.points), Leg(ISSUANCE, cfg.fund, -q.points)]
                expires = lot_expiry(cfg, state, snap.now)
                cum = state.lots_earned + q.points
                p.entry_fields[(account, cfg.fund)] = lot_records.lot_fields(
                    snap.program.id, account, cum, q.points, expires
                )
                live_from, next_expiry = new_state.live_from, new_state.next_expiry
                if state.lots_used >= state.lots_earned:  # no live lot before this one
                    live_from = acct.fund(cfg.fund).last_us + 1
                    next_expiry = expires
                new_state = replace(
                    new_state,
                    lots_earned=cum,
                    last_expiry=expires,
                    live_from=live_from,
                    next_expiry=next_expiry,
                )
            balance = acct.fund(cfg.fund).balance + q.points
            decision = apply_tier(p, snap, cfg, account, state, new_state, balance, txn_id, "earn")
            p.details.update(
                {
                    "account": account,
                    "points": q.points,
                    "amount": amount,
                    "currency": expected,
                    "multiplier": decimal_text(q.multiplier),  # "1.5", as the rules write it
                    "bonus": q.bonus,
                    "campaigns": list(q.campaigns),
                    "lot_expires": lot_time(expires),
                    "tier": decision.tier,
                    "previous_tier": decision.previous,
                }
            )
            return p

        def write() -> Transaction:
            try:
                return self.core.engine.commit(
                    program, txn_id, body_with(currency), plan, lock=[account]
                )
            except IdempotencyConflict:
                return other_currency()

        def other_currency() -> Transaction:
            # the program's currency named or left out is the same request: the
            # order may have been earned the other way
            prog = self.core.programs.get(program)
            expected = config_of(prog).earn.currency or prog.currency
            if currency in (None, expected):
                other = expected if currency is None else None
                with contextlib.suppress(IdempotencyConflict):
                    return self.core.engine.commit(
                        program, txn_id, body_with(other), plan, lock=[account]
                    )
            raise IdempotencyConflict(
                f"order {order_id} already earned points with a different request "
                "(account, amount, currency, time, description or metadata); an order earns once"
            ) from None

        settled = Settled()
        txn = self._settling(program, account, settled, write)
        result = EarnResult.of(txn)
        announce(self.core, txn, account)
        return result

    def redeem(
        self,
        program: str,
        account: str,
        points: int,
        reward_id: str,
        *,
        txn_id: str,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> RedeemResult:
        """Spend ``points`` on ``reward_id``, oldest lots first; idempotent by ``txn_id``."""
        check_id(account, "account")
        check_id(reward_id, "reward id")
        check_client_txn_id(txn_id)
        points = check_amount(points, "points")
        meta_in = check_metadata(metadata)
        if meta_in.get("reward_id", reward_id) != reward_id:  # the record names the reward
            raise ValidationError(
                f"metadata reward_id {meta_in['reward_id'][:40]!r} is not the reward "
                f"redeemed, {reward_id}"
            )
        body = body_of(
            op="redeem",
            account=account,
            points=points,
            reward_id=reward_id,
            description=description,
            metadata=meta_in or None,
        )

        def plan(snap: Snapshot) -> Plan:
            cfg = config_of(snap.program)
            acct = snap.account(account)
            # points past their date are not spent: they expire first (LotsDue)
            state = settled.state(MemberState.from_value(acct.attributes.get("loyalty")), snap.now)
            fund = acct.fund(cfg.fund)
            if fund.available < points:
                raise InsufficientFunds(
                    f"insufficient points: {account} has {fund.available} available, "
                    f"reward {reward_id} needs {points}"
                )
            used = min(state.lots_used + points, state.lots_earned)
            new_state = replace(state, lots_used=max(used, state.lots_used))
            meta = {"reward_id": reward_id, **dict(metadata or {})}
            p = Plan(
                type=TxnType.REDEEM,
                owner=account,
                description=description,
                metadata=meta,
                legs=[Leg(account, cfg.fund, -points), Leg(REDEMPTION, cfg.fund, points)],
            )
            balance = fund.balance - points
            decision = apply_tier(
                p, snap, cfg, account, state, new_state, balance, txn_id, "redeem"
            )
            p.details.update(
                {
                    "account": account,
                    "reward_id": reward_id,
                    "points": points,
                    "balance": balance,
                    "tier": decision.tier,
                    "previous_tier": decision.previous,
                }
            )
            return p

        settled = Settled()
        txn = self._settling(
            program,
            account,
            settled,
            lambda: self.core.engine.commit(program, txn_id, body, plan, lock=[account]),
        )
        announce(self.core, txn, account)
        return RedeemResult.of(txn)

    def _settle_due(self, program: str, account: str) -> str | None:
        return ExpiryJob(self.core).settle(program, account)

    def _settled_head(self, program: str, account: str) -> Account:
        """The member's account head once their lots past their date are expired
        (read again only when the head shows that one may be)."""
        return settled_head(self.core, program, self.core.accounts.get(program, account))

    def _settling(
        self, program: str, account: str, settled: Settled, write: Callable[[], Transaction]
    ) -> Transaction:
        """``write``, again once the member's lots past their date are expired if its
        plan met one (:class:`LotsDue`): no earn or redeem counts expired points."""
        try:
            return write()
        except LotsDue:
            settled.next_expiry = self._settle_due(program, account)
            settled.done = True
        return write()

    # -- tiers --------------------------------------------------------------

    def status(self, program: str, account: str) -> MemberStatus:
        """A member's tier, qualifying points and balance: one read of the account head
        (lots past their date, which the expiry job has not reached yet, expire first)."""
        cfg = config_of(self.core.programs.get(program))
        return member_status(self.core, cfg, self._settled_head(program, account))

    def tier_history(
        self, program: str, account: str, *, limit: int = 50, cursor: str | None = None
    ) -> TierChangePage:
        """Every tier change of a member, newest first."""
        return tier_history(self.core, program, account, limit=limit, cursor=cursor)

    def members(
        self, program: str, tier: str, *, limit: int = 100, cursor: str | None = None
    ) -> MemberPage:
        """Members of ``tier``, one page at a time (strongly consistent)."""
        return tier_members(self.core, program, tier, limit=limit, cursor=cursor)

    # -- lots, expiry, orders -----------------------------------------------

    def expiring(
        self, program: str, account: str, *, days: int | None = None, limit: int = 100
    ) -> list[lot_records.ExpiringLot]:
        """The first ``limit`` lots of :meth:`expiring_page`."""
        return self.expiring_page(program, account, days=days, limit=limit).lots

    def expiring_page(
        self,
        program: str,
        account: str,
        *,
        days: int | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExpiringPage:
        """Lots with points left that expire within ``days`` (default: the warning horizon),
        oldest first, a page at a time (lots already past their date expire first, as the
        job would). ``points`` is the total over every such lot."""
        cfg = config_of(self.core.programs.get(program))
        horizon_days = cfg.expiry.warn_days if days is None else days
        if (
            isinstance(horizon_days, bool)
            or not isinstance(horizon_days, int)
            or not 0 <= horizon_days <= 3660
        ):
            raise ValidationError("days must be an integer from 0 to 3660")
        check_limit(limit)
        listing = ("expiring", program, account, horizon_days)
        start = unbind_cursor(cursor, *listing)
        acct = self._settled_head(program, account)
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        horizon = self.core.clock.now() + timedelta(days=horizon_days)
        available = acct.fund(cfg.fund).available
        page = expiring_page(
            self.store,
            program,
            cfg.fund,
            account,
            state,
            horizon,
            available,
            limit=limit,
            cursor=start,
        )
        return replace(page, cursor=bind_cursor(page.cursor, *listing))

    def order(self, program: str, order_id: str) -> OrderLookup:
        """The earn an order produced, and its account: one get."""
        txn_id = order_txn_id(order_id)
        try:
            txn = self.core.transactions.get(program, txn_id)
        except NotFound as exc:
            raise NotFound(f"order {order_id} has not earned points in program {program}") from exc
        result = EarnResult.of(txn)
        return OrderLookup(order_id, result.account, result.points, txn)

    def expire(self, program: str, *, progress: Progress | None = None) -> ExpiryReport:
        """Expire every lot past its date (idempotent) and warn about soon-expiring points."""
        check_progress(progress)
        return ExpiryJob(self.core).run(program, progress=progress)

    def review_tiers(self, program: str, *, progress: Progress | None = None) -> ReviewReport:
        """The downgrade job: apply the downgrade rule to every member above the base tier."""
        check_progress(progress)
        return review_tiers(self.core, program, progress=progress)

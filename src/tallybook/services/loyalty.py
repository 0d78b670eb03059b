"""Loyalty: earn for orders, redeem for rewards, tiers, lots and expiry.

Storage (all in the single table, see store/keys.py):

- the program's rules: ``settings["loyalty"]`` of the program item;
- a member's state (tier, qualifying totals, lot counters): ``attrs["loyalty"]``
  of the account head, written with every earn/redeem/expiry, so each is one
  read of the head plus one transaction, whatever the account's history;
- the tier index: ``gsi1pk = TIER#{program}#{tier}`` on the head (members by
  tier, page by page through the index);
- lots: ``L#{cumulative end}`` rows in the account partition, written in the
  earn's transaction and indexed by expiry day on gsi2 for the expiry job;
- tier history: ``TL#{time}#{txn}`` rows, written in the transaction that
  changes the tier.

An earn's transaction id is ``order:{order_id}``: earning an order twice
replays the first result, and looking an order up is a single get.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from tallybook.domain.ids import check_id
from tallybook.domain.loyalty import LoyaltyConfig, parse_config, quote
from tallybook.domain.model import ISSUANCE, REDEMPTION, Leg, Program, Transaction, TxnType
from tallybook.domain.money import check_amount
from tallybook.domain.tiers import (
    NEVER,
    MemberState,
    TierDecision,
    decide_tier,
    lot_expiry,
    qualifying_points,
    record_earn,
)
from tallybook.errors import (
    ConditionFailed,
    ConfigError,
    InsufficientFunds,
    NotFound,
    ValidationError,
)
from tallybook.services.accounts import check_limit
from tallybook.services.codec import iso, parse_iso, to_us
from tallybook.services.events import LedgerEvent
from tallybook.services.loyalty_lots import ExpiringLot, expiry_day, lot_shard, read_lots
from tallybook.services.postings import Plan, Snapshot
from tallybook.services.transactions import body_of
from tallybook.store import keys
from tallybook.store.port import Item, NotExists, Put, SortCondition, Value

if TYPE_CHECKING:
    from tallybook.ledger import Ledger
    from tallybook.services.loyalty_jobs import ExpiryReport, Progress, ReviewReport

ORDER_PREFIX = "order:"
MAX_ORDER_ID = 128 - len(ORDER_PREFIX)


def order_txn_id(order_id: str) -> str:
    """The transaction id of an order's earn (the idempotency key)."""
    check_id(order_id, "order id")
    if len(order_id) > MAX_ORDER_ID:
        raise ValidationError(f"order id is longer than {MAX_ORDER_ID} characters")
    return ORDER_PREFIX + order_id


def scoped_txn_id(prefix: str, account: str, suffix: str) -> str:
    """``prefix:account:suffix``, hashing the account when the id would be too long."""
    txn = f"{prefix}:{account}:{suffix}"
    if len(txn) <= 128:
        return txn
    return f"{prefix}:{hashlib.sha256(account.encode()).hexdigest()[:32]}:{suffix}"


@dataclass(frozen=True, slots=True)
class EarnResult:
    order_id: str
    account: str
    points: int
    tier: str
    previous_tier: str | None
    lot_expires: str | None
    campaigns: tuple[str, ...]
    transaction: Transaction

    @property
    def replay(self) -> bool:
        return self.transaction.replay

    @staticmethod
    def of(txn: Transaction) -> EarnResult:
        d = txn.details
        return EarnResult(
            order_id=cast(str, txn.order_id),
            account=d["account"],
            points=d["points"],
            tier=d["tier"],
            previous_tier=d.get("previous_tier"),
            lot_expires=d.get("lot_expires"),
            campaigns=tuple(d.get("campaigns") or ()),
            transaction=txn,
        )


@dataclass(frozen=True, slots=True)
class RedeemResult:
    account: str
    reward_id: str
    points: int
    balance: int
    tier: str
    previous_tier: str | None
    transaction: Transaction

    @property
    def replay(self) -> bool:
        return self.transaction.replay

    @staticmethod
    def of(txn: Transaction) -> RedeemResult:
        d = txn.details
        return RedeemResult(
            account=d["account"],
            reward_id=d["reward_id"],
            points=d["points"],
            balance=d["balance"],
            tier=d["tier"],
            previous_tier=d.get("previous_tier"),
            transaction=txn,
        )


@dataclass(frozen=True, slots=True)
class MemberStatus:
    account: str
    tier: str
    qualifying_points: int
    balance: int
    available: int
    lifetime_points: int
    qualified_at: datetime | None
    next_tier: str | None
    points_to_next_tier: int | None


@dataclass(frozen=True, slots=True)
class TierChange:
    at: datetime
    previous: str | None
    tier: str
    reason: str
    txn_id: str


@dataclass(frozen=True, slots=True)
class TierChangePage:
    changes: list[TierChange]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class MemberPage:
    accounts: list[str]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class OrderLookup:
    order_id: str
    account: str
    points: int
    transaction: Transaction


class LoyaltyService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.store = ledger.store

    # -- configuration ------------------------------------------------------

    def configure(
        self, program_id: str, config: LoyaltyConfig | Mapping[str, Any]
    ) -> LoyaltyConfig:
        """Validate and store a program's loyalty rules (other settings are kept)."""
        cfg = config if isinstance(config, LoyaltyConfig) else parse_config(config)
        program = self.ledger.programs.get(program_id, fresh=True)
        spec = program.fund(cfg.fund)
        if spec is None:
            raise ConfigError(f"fund: program {program_id} has no fund {cfg.fund!r}")
        if cfg.earn.currency is not None and cfg.earn.currency != program.currency:
            raise ConfigError(
                f"earn.currency: {cfg.earn.currency} differs from the program's currency "
                f"{program.currency}"
            )
        settings = {**program.settings, "loyalty": cfg.to_settings()}
        self.ledger.programs.update_settings(program_id, settings)
        # no lot can expire before the rules exist: the expiry job starts here
        # rather than at the program's creation (never moves an existing one)
        yesterday = (self.ledger.clock.now() - timedelta(days=1)).date().isoformat()
        checkpoint = {**keys.loyalty_checkpoint(program_id).as_item(), "through": yesterday}
        with contextlib.suppress(ConditionFailed):
            self.store.put(checkpoint, NotExists("pk"))
        return cfg

    def config(self, program_id: str) -> LoyaltyConfig:
        return config_of(self.ledger.programs.get(program_id))

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
        check_amount(amount)
        txn_id = order_txn_id(order_id)
        body = body_of(
            op="earn",
            account=account,
            order_id=order_id,
            amount=amount,
            currency=currency,
            at=iso(at) if at else None,
            description=description,
            metadata=dict(metadata) if metadata else None,
        )

        def plan(snap: Snapshot) -> Plan:
            cfg = config_of(snap.program)
            expected = cfg.earn.currency or snap.program.currency
            if currency is not None and currency != expected:
                raise ValidationError(f"orders earn points in {expected}, not {currency}")
            acct = snap.account(account)
            state = MemberState.from_value(acct.attributes.get("loyalty"))
            q = quote(cfg, amount, tier=state.tier, at=at or snap.now)
            new_state = record_earn(cfg, state, q.points, snap.now)
            p = Plan(
                type=TxnType.EARN,
                order_id=order_id,
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
                p.actions.append(
                    Put(
                        self._lot_item(snap, account, cum, q.points, expires, txn_id, order_id),
                        NotExists("pk"),
                    )
                )
                new_state = replace(new_state, lots_earned=cum, last_expiry=expires)
            balance = acct.fund(cfg.fund).balance + q.points
            decision = self.apply_tier(p, snap, cfg, account, new_state, balance, txn_id, "earn")
            p.details.update(
                {
                    "account": account,
                    "points": q.points,
                    "amount": amount,
                    "currency": expected,
                    "multiplier": str(q.multiplier),
                    "bonus": q.bonus,
                    "campaigns": list(q.campaigns),
                    "lot_expires": expires,
                    "tier": decision.tier,
                    "previous_tier": decision.previous,
                }
            )
            return p

        txn = self.ledger.engine.commit(program, txn_id, body, plan, lock=[account])
        result = EarnResult.of(txn)
        self._announce(txn, account)
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
        check_amount(points, "points")
        body = body_of(
            op="redeem",
            account=account,
            points=points,
            reward_id=reward_id,
            description=description,
            metadata=dict(metadata) if metadata else None,
        )

        def plan(snap: Snapshot) -> Plan:
            cfg = config_of(snap.program)
            acct = snap.account(account)
            fund = acct.fund(cfg.fund)
            if fund.available < points:
                raise InsufficientFunds(
                    f"insufficient points: {account} has {fund.available} available, "
                    f"reward {reward_id} needs {points}"
                )
            state = MemberState.from_value(acct.attributes.get("loyalty"))
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
            decision = self.apply_tier(p, snap, cfg, account, new_state, balance, txn_id, "redeem")
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

        txn = self.ledger.engine.commit(program, txn_id, body, plan, lock=[account])
        self._announce(txn, account)
        return RedeemResult.of(txn)

    # -- tiers --------------------------------------------------------------

    def apply_tier(
        self,
        plan: Plan,
        snap: Snapshot,
        cfg: LoyaltyConfig,
        account: str,
        state: MemberState,
        balance: int,
        txn_id: str,
        reason: str,
    ) -> TierDecision:
        """Decide the member's tier and add the state, index and history writes to ``plan``."""
        qualifying = qualifying_points(cfg, state, snap.now, balance)
        decision = decide_tier(cfg, state, qualifying, snap.now)
        new_state = replace(state, tier=decision.tier, qualified_at=decision.qualified_at)
        plan.attrs[account] = {"loyalty": cast(Value, new_state.to_value())}
        if decision.changed:
            plan.head_sets[account] = {
                "gsi1pk": keys.tier_index(snap.program.id, decision.tier),
                "gsi1sk": account,
            }
            row: Item = {
                **keys.tier_log(snap.program.id, account, to_us(snap.now), txn_id).as_item(),
                "account": account,
                "previous": decision.previous,
                "tier": decision.tier,
                "reason": reason,
                "txn_id": txn_id,
                "at": iso(snap.now),
            }
            plan.actions.append(Put(row))
        plan.details["tier_changed"] = decision.changed
        return decision

    def status(self, program: str, account: str) -> MemberStatus:
        """A member's tier, qualifying points and balance: one read of the account head."""
        cfg = self.config(program)
        acct = self.ledger.accounts.get(program, account)
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        fund = acct.fund(cfg.fund)
        now = self.ledger.clock.now()
        qualifying = qualifying_points(cfg, state, now, fund.balance)
        tier = cfg.tier(state.tier)
        rank = cfg.rank(tier.name)
        nxt = cfg.tiers[rank + 1] if rank + 1 < len(cfg.tiers) else None
        return MemberStatus(
            account=account,
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
        self, program: str, account: str, *, limit: int = 50, cursor: str | None = None
    ) -> TierChangePage:
        """Every tier change of a member, newest first."""
        check_id(account, "account")
        check_limit(limit)
        page = self.store.query(
            keys.account_partition(program, account),
            SortCondition.begins_with(keys.TIER_LOG_PREFIX),
            forward=False,
            limit=limit,
            cursor=cursor,
        )
        changes = [
            TierChange(
                at=parse_iso(cast(str, i["at"])),
                previous=cast(str | None, i.get("previous")),
                tier=cast(str, i["tier"]),
                reason=cast(str, i["reason"]),
                txn_id=cast(str, i["txn_id"]),
            )
            for i in page.items
        ]
        return TierChangePage(changes, page.cursor)

    def members(
        self, program: str, tier: str, *, limit: int = 100, cursor: str | None = None
    ) -> MemberPage:
        """Members of ``tier``, by account id, one page at a time (index, eventually consistent)."""
        cfg = self.config(program)
        if all(t.name != tier for t in cfg.tiers):
            raise NotFound(f"program {program} has no tier {tier!r}")
        check_limit(limit)
        page = self.store.query(
            keys.tier_index(program, tier), index="gsi1", limit=limit, cursor=cursor
        )
        return MemberPage([cast(str, i["account"]) for i in page.items], page.cursor)

    # -- lots, expiry, orders -----------------------------------------------

    def expiring(
        self, program: str, account: str, *, days: int | None = None, limit: int = 100
    ) -> list[ExpiringLot]:
        """Lots with points left that expire within ``days`` (default: the warning horizon),
        oldest first; lots already past their date but not yet expired by the job included."""
        cfg = self.config(program)
        horizon_days = cfg.expiry.warn_days if days is None else days
        if isinstance(horizon_days, bool) or not 0 <= horizon_days <= 3660:
            raise ValidationError("days must be an integer from 0 to 3660")
        check_limit(limit)
        acct = self.ledger.accounts.get(program, account)
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        horizon = self.ledger.clock.now() + timedelta(days=horizon_days)
        return read_lots(self.store, program, account, state.lots_used, until=horizon, limit=limit)

    def order(self, program: str, order_id: str) -> OrderLookup:
        """The earn an order produced, and its account: one get."""
        txn_id = order_txn_id(order_id)
        try:
            txn = self.ledger.transactions.get(program, txn_id)
        except NotFound as exc:
            raise NotFound(f"order {order_id} has not earned points in program {program}") from exc
        result = EarnResult.of(txn)
        return OrderLookup(order_id, result.account, result.points, txn)

    def expire(self, program: str, *, progress: Progress | None = None) -> ExpiryReport:
        """Expire every lot past its date (idempotent) and warn about soon-expiring points."""
        from tallybook.services.loyalty_jobs import ExpiryJob

        return ExpiryJob(self).run(program, progress=progress)

    def review_tiers(self, program: str, *, progress: Progress | None = None) -> ReviewReport:
        """The downgrade job: apply the downgrade rule to every member above the base tier."""
        from tallybook.services.loyalty_jobs import review_tiers

        return review_tiers(self, program, progress=progress)

    # -- helpers -------------------------------------------------------------

    @staticmethod
    def _lot_item(
        snap: Snapshot,
        account: str,
        cum: int,
        points: int,
        expires: str,
        txn_id: str,
        order_id: str,
    ) -> Item:
        item: Item = {
            **keys.lot(snap.program.id, account, cum).as_item(),
            "account": account,
            "amount": points,
            "cum_end": cum,
            "expires": expires,
            "txn_id": txn_id,
            "order_id": order_id,
            "earned_at": iso(snap.now),
        }
        if expires != NEVER:
            day = expiry_day(expires)
            item["gsi2pk"] = keys.lot_expiry_index(snap.program.id, day, lot_shard(account))
            item["gsi2sk"] = f"{account}#{cum:020d}"
        return item

    def _announce(self, txn: Transaction, account: str) -> None:
        """Raise TierChanged for a fresh (not replayed) change, except first enrolment
        into the base tier."""
        d = txn.details
        if txn.replay or not d.get("tier_changed"):
            return
        if d.get("previous_tier") is None and d["tier"] == self.config(txn.program).base_tier.name:
            return
        self.ledger.events.publish(
            LedgerEvent(
                txn.program,
                account,
                "TierChanged",
                {"previous": d.get("previous_tier"), "tier": d["tier"], "txn_id": txn.id},
                source_id=txn.id,
            )
        )


def config_of(program: Program) -> LoyaltyConfig:
    raw = program.settings.get("loyalty")
    if raw is None:
        raise ConfigError(
            f"program {program.id} has no loyalty configuration; load one with "
            "'tallybook loyalty config load FILE.toml'"
        )
    return parse_config(raw, source=f"program {program.id} loyalty settings")

"""Loyalty resources: program rules, earn per order, redeem, tiers, expiring points, orders.

An earn is idempotent by its order id (its transaction id is ``order:{id}``),
so the ``Idempotency-Key`` header is optional there; a redemption takes the
header as its transaction id. Jobs (expiry, downgrades) need an admin key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response, status

from tallybook.domain.times import check_time_range
from tallybook.http.deps import (
    AdminPrincipal,
    IdempotencyKey,
    LedgerDep,
    NoBody,
    ParsedBodyRoute,
    ReadPrincipal,
    WritePrincipal,
    key_header,
)
from tallybook.http.idempotency import REPLAYED_HEADER, replays_answered_by
from tallybook.http.schemas.common import ASCII_DIGITS, ID_PATTERN
from tallybook.http.schemas.ledger import TransactionOut
from tallybook.http.schemas.loyalty import (
    LOYALTY_RULES_SCHEMA,
    EarnIn,
    EarnOut,
    ExpiringLotOut,
    ExpiringOut,
    ExpiryReportOut,
    MemberOut,
    MembersOut,
    OrderOut,
    RedeemIn,
    RedeemOut,
    ReviewReportOut,
    TierChangeOut,
    TierHistoryOut,
    TierOut,
)
from tallybook.services.ledger.accounts import MAX_PAGE
from tallybook.services.loyalty.service import MAX_ORDER_ID

router = APIRouter(prefix="/v1", tags=["loyalty"], route_class=ParsedBodyRoute)

AccountId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="account id")
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"page size, 1-{MAX_PAGE}"), ASCII_DIGITS
]
Cursor = Annotated[
    str | None, Query(max_length=2048, description="the `cursor` of the previous page")
]


def _at(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return check_time_range(aware, "'at'").astimezone(UTC)


@router.put("/program/loyalty", summary="Set the program's loyalty rules (admin)")
def put_config(
    principal: AdminPrincipal,
    ledger: LedgerDep,
    body: Annotated[
        dict[str, Any],
        Body(
            description="rules, as in examples/loyalty.toml",
            json_schema_extra=LOYALTY_RULES_SCHEMA,
        ),
    ],
) -> dict[str, Any]:
    return ledger.loyalty.configure(principal.program, body).to_settings()


@router.get("/program/loyalty", summary="The program's loyalty rules")
def get_config(principal: ReadPrincipal, ledger: LedgerDep) -> dict[str, Any]:
    return ledger.loyalty.config(principal.program).to_settings()


@router.post(
    "/accounts/{account}/earn",
    openapi_extra=replays_answered_by("service"),
    status_code=status.HTTP_201_CREATED,
    summary="Earn points for an order, exactly once per order id",
    responses={200: {"model": EarnOut, "description": "the order was rewarded before"}},
)
def earn(
    account: AccountId,
    body: EarnIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        key_header(
            "optional: the order id is the idempotency key (one outside "
            "1-128 of A-Z a-z 0-9 . _ : - is still a 422)"
        ),
    ] = None,
) -> EarnOut:
    r = ledger.loyalty.earn(
        principal.program,
        account,
        body.order_id,
        body.amount,
        currency=body.currency,
        at=_at(body.at),
        description=body.description,
        metadata=body.metadata,
    )
    if r.replay:
        response.status_code = status.HTTP_200_OK
        response.headers[REPLAYED_HEADER] = "true"
    response.headers["Location"] = f"/v1/orders/{r.order_id}"
    return EarnOut.of(r)


@router.post(
    "/accounts/{account}/redeem",
    status_code=status.HTTP_201_CREATED,
    summary="Redeem points for a reward, oldest points first",
    description="The `Idempotency-Key` is the transaction id. Not enough points: 422 "
    "`insufficient-funds`.",
)
def redeem(
    account: AccountId,
    body: RedeemIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: IdempotencyKey,
    response: Response,
) -> RedeemOut:
    r = ledger.loyalty.redeem(
        principal.program,
        account,
        body.points,
        body.reward_id,
        txn_id=txn_id,
        description=body.description,
        metadata=body.metadata,
    )
    if r.replay:  # the same status as the original, however old (docs/http.md)
        response.headers[REPLAYED_HEADER] = "true"
    return RedeemOut.of(r)


@router.get("/accounts/{account}/tier", summary="A member's tier and qualifying points")
def get_tier(account: AccountId, principal: ReadPrincipal, ledger: LedgerDep) -> TierOut:
    s = ledger.loyalty.status(principal.program, account)
    return TierOut(
        account=s.account,
        tier=s.tier,
        qualifying_points=s.qualifying_points,
        balance=s.balance,
        available=s.available,
        lifetime_points=s.lifetime_points,
        qualified_at=s.qualified_at,
        next_tier=s.next_tier,
        points_to_next_tier=s.points_to_next_tier,
    )


@router.get("/accounts/{account}/tier/history", summary="A member's tier changes, newest first")
def get_tier_history(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> TierHistoryOut:
    page = ledger.loyalty.tier_history(principal.program, account, limit=limit, cursor=cursor)
    return TierHistoryOut(
        changes=[
            TierChangeOut(
                at=c.at, previous=c.previous, tier=c.tier, reason=c.reason, txn_id=c.txn_id
            )
            for c in page.changes
        ],
        cursor=page.cursor,
    )


@router.get("/accounts/{account}/expiring", summary="Points expiring soon, oldest first")
def get_expiring(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    days: Annotated[
        int | None, Query(ge=0, le=3660, description="default: warn_days"), ASCII_DIGITS
    ] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ExpiringOut:
    page = ledger.loyalty.expiring_page(
        principal.program, account, days=days, limit=limit, cursor=cursor
    )
    return ExpiringOut(
        account=account,
        points=page.points,
        cursor=page.cursor,
        lots=[
            ExpiringLotOut(
                expires=lot.expires,
                points=lot.points,
                order_id=lot.order_id,
                earned_at=lot.earned_at,
            )
            for lot in page.lots
        ],
    )


@router.get("/tiers/{tier}/members", summary="Members of a tier, page by page")
def get_members(
    tier: Annotated[
        str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="tier name")
    ],
    principal: ReadPrincipal,
    ledger: LedgerDep,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> MembersOut:
    page = ledger.loyalty.members(principal.program, tier, limit=limit, cursor=cursor)
    return MembersOut(
        tier=tier,
        members=[
            MemberOut(account=m.account, points=m.points, qualifying_points=m.qualifying_points)
            for m in page.members
        ],
        accounts=page.accounts,
        cursor=page.cursor,
    )


@router.get("/orders/{order_id}", summary="The earn an order produced, and its account")
def get_order(
    order_id: Annotated[
        str,
        Path(min_length=1, max_length=MAX_ORDER_ID, pattern=ID_PATTERN, description="order id"),
    ],
    principal: ReadPrincipal,
    ledger: LedgerDep,
) -> OrderOut:
    found = ledger.loyalty.order(principal.program, order_id)
    return OrderOut(
        order_id=found.order_id,
        account=found.account,
        points=found.points,
        transaction=TransactionOut.of(found.transaction),
    )


@router.post("/loyalty/expire", summary="Run the expiry job (admin)")
def run_expire(principal: AdminPrincipal, _: NoBody, ledger: LedgerDep) -> ExpiryReportOut:
    r = ledger.loyalty.expire(principal.program)
    return ExpiryReportOut(
        days=r.days,
        accounts=r.accounts,
        lots=r.lots,
        points=r.points,
        transactions=r.transactions,
        warned=r.warned,
        warnings_failed=r.warnings_failed,
    )


@router.post("/loyalty/downgrade", summary="Run the downgrade job (admin)")
def run_downgrade(principal: AdminPrincipal, _: NoBody, ledger: LedgerDep) -> ReviewReportOut:
    r = ledger.loyalty.review_tiers(principal.program)
    return ReviewReportOut(members=r.members, downgraded=r.downgraded)

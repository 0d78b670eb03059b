"""Ledger resources: the program, accounts, balances, entries, transactions, transfers.

Every path is the API key's program's; another program's accounts answer 404.
Postings take the ``Idempotency-Key`` header as their transaction id, so a
retry after 24 hours (when the stored HTTP response has expired) still
returns the original transaction rather than posting twice.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Response, status

from tallybook.domain.ids import is_system_account
from tallybook.domain.model import Leg, Transaction
from tallybook.domain.money import MAX_AMOUNT
from tallybook.domain.times import check_time_range
from tallybook.errors import Forbidden, ValidationError
from tallybook.http.deps import (
    AdminPrincipal,
    IdempotencyKey,
    LedgerDep,
    ParsedBodyRoute,
    Principal,
    ReadPrincipal,
    WritePrincipal,
    run_blocking,
)
from tallybook.http.idempotency import REPLAYED_HEADER, replays_answered_by
from tallybook.http.schemas.common import ASCII_DIGITS, FUND_PATTERN, ID_PATTERN, Time
from tallybook.http.schemas.ledger import (
    AccountOut,
    AdjustIn,
    BalanceOut,
    BalancesOut,
    CreditIn,
    DebitIn,
    EntryOut,
    EntryPageOut,
    FundOut,
    OpenAccountIn,
    ProgramOut,
    RawIn,
    SystemBalanceOut,
    ThresholdIn,
    TransactionIn,
    TransactionListOut,
    TransactionOut,
    TransactionPageOut,
    TransferIn,
)
from tallybook.ledger import Ledger
from tallybook.services.ledger.accounts import MAX_PAGE, balances_of

router = APIRouter(prefix="/v1", tags=["ledger"], route_class=ParsedBodyRoute)

AccountId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="account id")
]
TxnId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="transaction id")
]
OrderId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="order id")
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"page size, 1-{MAX_PAGE}"), ASCII_DIGITS
]
Cursor = Annotated[
    str | None,
    Query(max_length=2048, description="the `cursor` of the previous page"),
]


def _utc(value: datetime | None, name: str) -> datetime | None:
    """Naive times are UTC; times outside 1970-9000 are refused (422)."""
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        converted = aware.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ValidationError(f"'{name}' is out of range") from exc
    return check_time_range(converted, f"'{name}'")


def _posted(txn: Transaction, response: Response) -> TransactionOut:
    response.headers["Location"] = f"/v1/transactions/{txn.id}"
    if txn.replay:
        response.headers[REPLAYED_HEADER] = "true"
    return TransactionOut.of(txn)


# --- program -----------------------------------------------------------------


@router.get("/program", summary="The API key's program and its funds")
def get_program(principal: ReadPrincipal, ledger: LedgerDep) -> ProgramOut:
    return ProgramOut.of(ledger.programs.get(principal.program))


@router.put(
    "/program/funds/{fund}/low-balance-threshold",
    summary="Set or clear the amount below which a fund raises LowBalance (admin)",
)
def put_low_balance_threshold(
    fund: Annotated[str, Path(pattern=FUND_PATTERN, description="fund name")],
    body: ThresholdIn,
    principal: AdminPrincipal,
    ledger: LedgerDep,
) -> FundOut:
    program = ledger.programs.set_low_balance_threshold(principal.program, fund, body.threshold)
    spec = program.fund(fund)
    assert spec is not None
    return FundOut.of(spec)


# --- accounts ----------------------------------------------------------------


@router.post(
    "/accounts",
    status_code=status.HTTP_201_CREATED,
    summary="Open an account (idempotent: opening an open account answers 200)",
    responses={200: {"model": AccountOut, "description": "the account was open already"}},
)
def open_account(
    body: OpenAccountIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", max_length=128, description="optional here"),
    ] = None,
) -> AccountOut:
    account, created = ledger.accounts.open(
        principal.program, body.account, attributes=dict(body.attributes or {})
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/accounts/{account.id}"
    balances = ledger.accounts.balances(principal.program, account.id)
    return AccountOut.of(account, balances)


@router.get("/accounts/{account}", summary="An account with every fund's balance")
def get_account(account: AccountId, principal: ReadPrincipal, ledger: LedgerDep) -> AccountOut:
    acct = ledger.accounts.get(principal.program, account)
    program = ledger.programs.get(principal.program)
    return AccountOut.of(acct, balances_of(program, acct))


@router.get(
    "/accounts/{account}/balances",
    summary="Balance, held and available amount of every fund (one storage read)",
)
def get_balances(account: AccountId, principal: ReadPrincipal, ledger: LedgerDep) -> BalancesOut:
    balances = ledger.accounts.balances(principal.program, account)
    return BalancesOut(account=account, balances=[BalanceOut.of(b) for b in balances])


@router.get(
    "/accounts/{account}/entries",
    summary="A fund's history: each entry carries the resulting balance",
)
def get_entries(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    fund: Annotated[str, Query(pattern=r"^[a-z][a-z0-9_]{0,31}$", description="fund name")],
    order: Annotated[
        Literal["newest", "oldest"], Query(description="newest first (default) or oldest first")
    ] = "newest",
    since: Annotated[Time | None, Query(description="inclusive (ISO 8601)")] = None,
    until: Annotated[Time | None, Query(description="exclusive (ISO 8601)")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> EntryPageOut:
    page = ledger.accounts.history(
        principal.program,
        account,
        fund,
        newest_first=order == "newest",
        since=_utc(since, "since"),
        until=_utc(until, "until"),
        limit=limit,
        cursor=cursor,
    )
    return EntryPageOut(entries=[EntryOut.of(e) for e in page.entries], cursor=page.cursor)


@router.get("/accounts/{account}/transactions", summary="An account's transactions, newest first")
def get_account_transactions(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> TransactionPageOut:
    ledger.accounts.get(principal.program, account)
    page = ledger.transactions.for_owner(principal.program, account, limit=limit, cursor=cursor)
    return TransactionPageOut(
        transactions=[TransactionOut.of(t) for t in page.transactions], cursor=page.cursor
    )


# --- transactions --------------------------------------------------------------


@router.post(
    "/transactions",
    openapi_extra=replays_answered_by("ledger"),
    status_code=status.HTTP_201_CREATED,
    summary="Post a credit, debit, adjustment or raw balanced transaction",
    description="`type` selects the shape. The `Idempotency-Key` is the transaction id.",
)
async def post_transaction(
    body: Annotated[TransactionIn, Body()],
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: IdempotencyKey,
    response: Response,
) -> TransactionOut:
    # async, the posting through run_blocking: no thread hop on SQLite (hot path)
    txn = await run_blocking(ledger, _post_transaction, ledger, body, principal, txn_id)
    return _posted(txn, response)


def _post_transaction(
    ledger: Ledger, body: TransactionIn, principal: Principal, txn_id: str
) -> Transaction:
    svc = ledger.transactions
    p = principal.program
    txn: Transaction
    if isinstance(body, CreditIn | DebitIn):
        post_one = svc.credit if isinstance(body, CreditIn) else svc.debit
        txn = post_one(
            p,
            body.account,
            body.fund,
            body.amount,
            txn_id=txn_id,
            order_id=body.order_id,
            description=body.description,
            metadata=body.metadata,
        )
    elif isinstance(body, AdjustIn):
        txn = svc.adjust(
            p,
            body.account,
            body.fund,
            body.amount,
            txn_id=txn_id,
            description=body.description,
            metadata=body.metadata,
        )
    else:
        assert isinstance(body, RawIn)
        _system_legs_need_admin(body, principal)
        txn = svc.post(
            p,
            [Leg(leg.account, leg.fund, leg.amount) for leg in body.legs],
            txn_id=txn_id,
            type="raw",
            order_id=body.order_id,
            description=body.description,
            metadata=body.metadata,
        )
    return txn


def _system_legs_need_admin(body: RawIn, principal: Principal) -> None:
    """Legs on ``@issuance``, ``@redemption``, ... move counters and mint value
    outside the wallet and loyalty rules: only an ``admin`` key may post them raw."""
    system = sorted({leg.account for leg in body.legs if is_system_account(leg.account)})
    if system and "admin" not in principal.scopes:
        raise Forbidden(
            f"a raw posting touching system account(s) {', '.join(system)} needs the 'admin' scope"
        )


@router.get(
    "/system-accounts/{account}",
    summary="A system account's balance per fund (admin; reads every account head)",
    description="`account` is one of `@issuance`, `@redemption`, `@expiry`, `@external`, "
    "`@adjustment`. Customer balances plus these sum to zero per unit (invariant 5).",
)
def get_system_balance(
    account: Annotated[str, Path(max_length=32, description="system account, such as `@issuance`")],
    principal: AdminPrincipal,
    ledger: LedgerDep,
) -> SystemBalanceOut:
    balances = ledger.transactions.system_balance(principal.program, account)
    return SystemBalanceOut(account=account, balances=balances)


@router.get("/transactions/{txn_id}", summary="A transaction by id")
def get_transaction(txn_id: TxnId, principal: ReadPrincipal, ledger: LedgerDep) -> TransactionOut:
    return TransactionOut.of(ledger.transactions.get(principal.program, txn_id))


@router.get(
    "/orders/{order_id}/transactions",
    summary="Transactions recorded with an order id, oldest first",
)
def get_order_transactions(
    order_id: OrderId, principal: ReadPrincipal, ledger: LedgerDep
) -> TransactionListOut:
    txns = ledger.transactions.for_order(principal.program, order_id)
    return TransactionListOut(transactions=[TransactionOut.of(t) for t in txns])


@router.post(
    "/transfers",
    openapi_extra=replays_answered_by("ledger"),
    status_code=status.HTTP_201_CREATED,
    summary="Move an amount of a fund between two accounts, all or nothing",
    description=f"Amounts are 1 to {MAX_AMOUNT} minor units. "
    "The `Idempotency-Key` is the transaction id.",
)
async def post_transfer(
    body: TransferIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: IdempotencyKey,
    response: Response,
) -> TransactionOut:
    transfer = partial(
        ledger.transactions.transfer,
        principal.program,
        body.source,
        body.destination,
        body.fund,
        body.amount,
        txn_id=txn_id,
        description=body.description,
        metadata=body.metadata,
    )
    return _posted(await run_blocking(ledger, transfer), response)

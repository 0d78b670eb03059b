"""Notifications over HTTP, and the SNS-style inbound events endpoint.

- ``GET /v1/accounts/{account}/notifications``: the active ones, newest first;
- ``POST`` there adds one (it supersedes the active one of its type); the
  ``Idempotency-Key`` header, when sent, is also the notification's
  idempotency key, so a retry after the 24 h response cache still adds nothing;
- ``DELETE .../notifications/{id}`` dismisses one (again: 200, unchanged);
  ``DELETE .../notifications?type=T`` dismisses the active one of a type;
- ``GET .../notifications/history``: newest first, time range, cursor;
- ``POST /v1/events/sns``: an SNS envelope (``text/plain`` JSON as SNS sends
  it, or ``application/json``); ``MessageId`` is the idempotency key. A bad
  message answers 422 ``rejected-message`` and is counted
  (``GET /v1/events/stats``).

SNS cannot send a Bearer token, but it does HTTP Basic authentication from
the credentials in the subscription URL (``https://sns:KEY@host/v1/events/sns``):
it posts without them first and sends them after a 401 that asks for Basic.
So this one endpoint also takes the API key as the Basic password (any user
name) and its 401 carries ``WWW-Authenticate: Basic``. Keys never go in a
query string, where access logs would keep them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse

from tallybook.domain.notifications import rules_to_settings
from tallybook.errors import Forbidden, Unauthorized
from tallybook.http.deps import (
    AdminPrincipal,
    LedgerDep,
    NoBody,
    ParsedBodyRoute,
    Principal,
    ReadPrincipal,
    WritePrincipal,
    authorization,
)
from tallybook.http.idempotency import REPLAYED_HEADER, replays_answered_by
from tallybook.http.problems import problem_response, problem_responses
from tallybook.http.routers.ledger import Cursor, Limit, _utc
from tallybook.http.schemas.common import ID_PATTERN, Time
from tallybook.http.schemas.notifications import (
    NOTIFICATION_RULES_SCHEMA,
    TYPE_PATTERN,
    DismissedOut,
    IngestOut,
    IngestStatsOut,
    NotificationIn,
    NotificationListOut,
    NotificationOut,
    NotificationPageOut,
)
from tallybook.ledger import Ledger

router = APIRouter(prefix="/v1", tags=["notifications"], route_class=ParsedBodyRoute)

AccountId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="account id")
]
NotificationId = Annotated[
    str, Path(pattern=r"^n-\d{16}-[0-9a-f]{10}$", description="notification id")
]


@router.get("/program/notification-rules", summary="The program's notification rules")
def get_rules(principal: ReadPrincipal, ledger: LedgerDep) -> dict[str, Any]:
    return rules_to_settings(ledger.notifications.rules(principal.program))


@router.put(
    "/program/notification-rules",
    summary="Replace the program's notification rules (admin)",
    description='For example `{"retention_days": 30, "types": {"TopUp": '
    '{"dismisses": ["LowBalance"]}}}` (as `tallybook notifications rules --set FILE`).',
)
def put_rules(
    principal: AdminPrincipal,
    ledger: LedgerDep,
    body: Annotated[
        dict[str, Any],
        Body(
            description="retention_days and rules per type",
            json_schema_extra=NOTIFICATION_RULES_SCHEMA,
        ),
    ],
) -> dict[str, Any]:
    return rules_to_settings(ledger.notifications.set_rules(principal.program, body))


@router.get("/accounts/{account}/notifications", summary="Active notifications, newest first")
def list_notifications(
    account: AccountId, principal: ReadPrincipal, ledger: LedgerDep
) -> NotificationListOut:
    found = ledger.notifications.list(principal.program, account)
    return NotificationListOut(notifications=[NotificationOut.of(n) for n in found])


@router.post(
    "/accounts/{account}/notifications",
    openapi_extra=replays_answered_by("service"),
    status_code=status.HTTP_201_CREATED,
    summary="Add a notification (supersedes the active one of its type)",
    responses={200: {"model": NotificationOut, "description": "a replay of the same key"}},
)
def add_notification(
    account: AccountId,
    body: NotificationIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=128,
            pattern=ID_PATTERN,
            description="recommended: adding again with it is a no-op",
        ),
    ] = None,
) -> NotificationOut:
    n = ledger.notifications.add(
        principal.program,
        account,
        body.type,
        body.payload,
        idempotency_key=idempotency_key,
        expires_at=_utc(body.expires_at, "expires_at"),
    )
    response.headers["Location"] = f"/v1/accounts/{account}/notifications/{n.id}"
    if n.replay:
        response.status_code = status.HTTP_200_OK
        response.headers[REPLAYED_HEADER] = "true"
    return NotificationOut.of(n)


@router.delete(
    "/accounts/{account}/notifications",
    summary="Dismiss the active notification of a type",
)
def dismiss_type(
    account: AccountId,
    principal: WritePrincipal,
    _: NoBody,
    ledger: LedgerDep,
    type: Annotated[str, Query(pattern=TYPE_PATTERN, description="notification type")],
) -> DismissedOut:
    n = ledger.notifications.dismiss_type(principal.program, account, type)
    return DismissedOut(dismissed=NotificationOut.of(n) if n else None)


@router.get(
    "/accounts/{account}/notifications/history",
    summary="Notification history (superseded, dismissed, delivered), newest first",
)
def notification_history(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    order: Annotated[
        Literal["newest", "oldest"], Query(description="newest first (default) or oldest first")
    ] = "newest",
    since: Annotated[Time | None, Query(description="inclusive (ISO 8601)")] = None,
    until: Annotated[Time | None, Query(description="exclusive (ISO 8601)")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> NotificationPageOut:
    page = ledger.notifications.history(
        principal.program,
        account,
        since=_utc(since, "since"),
        until=_utc(until, "until"),
        newest_first=order == "newest",
        limit=limit,
        cursor=cursor,
    )
    return NotificationPageOut(
        notifications=[NotificationOut.of(n) for n in page.notifications], cursor=page.cursor
    )


@router.get(
    "/accounts/{account}/notifications/{notification_id}",
    summary="One notification by id, active or from history",
)
def get_notification(
    account: AccountId,
    notification_id: NotificationId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
) -> NotificationOut:
    return NotificationOut.of(ledger.notifications.get(principal.program, account, notification_id))


@router.delete(
    "/accounts/{account}/notifications/{notification_id}",
    summary="Dismiss a notification (dismissing it again answers the same)",
)
def dismiss_notification(
    account: AccountId,
    notification_id: NotificationId,
    principal: WritePrincipal,
    _: NoBody,
    ledger: LedgerDep,
) -> NotificationOut:
    n = ledger.notifications.dismiss(principal.program, account, notification_id)
    return NotificationOut.of(n)


@router.post(
    "/events/sns",
    response_model=IngestOut,
    summary="Inbound event in an SNS-style envelope (MessageId is the idempotency key)",
    description="Authenticate with `Authorization: Bearer <key>` (write scope) or, as SNS "
    "does from a subscription URL `https://sns:<key>@host/v1/events/sns`, HTTP Basic with "
    "the key as the password: a request without credentials gets a 401 asking for Basic.",
    responses={
        status_code: {**problem_responses(status_code)[status_code], "description": description}
        for status_code, description in (
            (401, "no or unknown key (`WWW-Authenticate: Basic ..., Bearer`)"),
            (403, "the key lacks the write scope"),
            (422, "a rejected message (`rejected-message`, counted)"),
        )
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
)
async def ingest_sns(request: Request, ledger: LedgerDep) -> IngestOut | JSONResponse:
    from anyio import to_thread

    try:
        principal = await to_thread.run_sync(_sns_principal, request, ledger)
    except Unauthorized as exc:
        return problem_response(
            401,
            exc.code,
            exc.message,
            request=request,
            title="Unauthorized",
            headers={"WWW-Authenticate": SNS_CHALLENGE},
        )
    raw = await request.body()
    result = await to_thread.run_sync(ledger.notifications.ingestor.ingest, principal.program, raw)
    return IngestOut.of(result)


SNS_CHALLENGE = 'Basic realm="tallybook", charset="UTF-8", Bearer'


def _sns_principal(request: Request, ledger: Ledger) -> Principal:
    """The caller of the SNS endpoint: a Bearer key, or the key as Basic password."""
    scheme, _, token = authorization(request).partition(" ")
    secret = token.strip()
    if scheme.lower() == "basic" and secret:
        try:
            _, _, secret = base64.b64decode(secret, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            secret = ""
    elif scheme.lower() != "bearer":
        secret = ""
    if not secret:
        raise Unauthorized(
            "missing API key: send 'Authorization: Bearer <key>', or the key as the "
            "HTTP Basic password (https://sns:<key>@host/v1/events/sns)"
        )
    key = ledger.keys.authenticate(secret)
    principal = Principal(key.id, key.program, frozenset(key.scopes))
    request.state.principal = principal
    if not {"write", "admin"} & principal.scopes:
        raise Forbidden("this API key lacks the 'write' scope")
    return principal


@router.get(
    "/events/stats",
    summary="The key's program's inbound events accepted and rejected by this process",
)
def ingest_stats(principal: ReadPrincipal, ledger: LedgerDep) -> IngestStatsOut:
    return IngestStatsOut(**ledger.notifications.ingestor.stats_for(principal.program).as_dict())

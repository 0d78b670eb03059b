"""Request and response bodies of notifications and event ingestion."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tallybook.domain.notifications import MAX_DISMISSES, MAX_RETENTION_DAYS, Notification
from tallybook.http.schemas.common import Time, TimeOut
from tallybook.services.notifications.ingest import IngestResult

TYPE_PATTERN = r"^[A-Za-z][A-Za-z0-9_.:\-]{0,63}$"

_DAYS = {"type": "integer", "minimum": 1, "maximum": MAX_RETENTION_DAYS}
_TYPE_RULE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "listed": {"type": "boolean", "description": "shown in the active list"},
        "deliver": {"type": "boolean", "description": "handed to the delivery hook"},
        "dismisses": {
            "type": "array",
            "items": {"type": "string", "pattern": TYPE_PATTERN},
            "maxItems": MAX_DISMISSES,
            "description": "types an add of this type dismisses (never itself)",
        },
        "expires_after_days": {
            "anyOf": [_DAYS, {"type": "null"}],
            "description": "an active notification of this type disappears after this many days",
        },
    },
}
#: the body of ``PUT /v1/program/notification-rules``, with every limit
#: :func:`tallybook.domain.notifications.parse_rules` enforces (a 422 beyond)
NOTIFICATION_RULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "retention_days": {
            **_DAYS,
            "default": 90,
            "description": "days history and idempotency keys are kept",
        },
        "types": {"type": "object", "additionalProperties": _TYPE_RULE},
        "default": _TYPE_RULE,
    },
}


class NotificationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(pattern=TYPE_PATTERN, examples=["TierChanged"])
    payload: dict[str, Any] = Field(
        default_factory=dict,
        description="JSON object of at most 16 KB nesting at most 16 levels; "
        "numbers must be integers",
    )
    expires_at: Time | None = Field(
        default=None,
        description="when the active notification disappears by itself: it is listed "
        "until the whole second this time falls in, which must be later than the "
        "current second (else 422)",
    )


class NotificationOut(BaseModel):
    id: str
    account: str
    type: str
    payload: dict[str, Any]
    created_at: TimeOut
    status: Literal["active", "superseded", "dismissed", "expired", "unlisted"]
    listed: bool
    expires_at: TimeOut | None = None
    dismissed_at: TimeOut | None = None
    dismissed_by: str | None = Field(
        default=None, description="the superseding notification's id, a transaction id or 'user'"
    )
    dismiss_reason: str | None = None
    delivery: Literal["delivered", "failed"] | None = None
    delivered_at: TimeOut | None = None
    delivery_error: str | None = None
    source: str | None = Field(default=None, description="idempotency key it was added with")

    @classmethod
    def of(cls, n: Notification) -> NotificationOut:
        return cls(
            id=n.id,
            account=n.account,
            type=n.type,
            payload=n.payload,
            created_at=n.created_at,
            status=n.status.value,
            listed=n.listed,
            expires_at=n.expires_at,
            dismissed_at=n.dismissed_at,
            dismissed_by=n.dismissed_by,
            dismiss_reason=n.dismiss_reason,
            delivery=n.delivery,
            delivered_at=n.delivered_at,
            delivery_error=n.delivery_error,
            source=n.source,
        )


class NotificationListOut(BaseModel):
    notifications: list[NotificationOut]


class NotificationPageOut(BaseModel):
    notifications: list[NotificationOut]
    cursor: str | None = None


class DismissedOut(BaseModel):
    dismissed: NotificationOut | None = Field(description="null when none of that type was active")


class IngestOut(BaseModel):
    status: Literal["added", "replayed", "confirmed", "pending_confirmation", "ignored"]
    message_id: str
    notification: NotificationOut | None = None
    detail: str | None = None

    @classmethod
    def of(cls, r: IngestResult) -> IngestOut:
        return cls(
            status=r.status,
            message_id=r.message_id,
            notification=NotificationOut.of(r.notification) if r.notification else None,
            detail=r.detail,
        )


class IngestStatsOut(BaseModel):
    received: int
    added: int
    replayed: int
    confirmed: int
    pending_confirmation: int = Field(
        description="subscription confirmations left for an operator to visit"
    )
    ignored: int = Field(description="unsubscribe confirmations")
    rejected: int
    reasons: dict[str, int] = Field(description="rejections by reason since the process started")

"""Request and response bodies of webhook subscriptions and deliveries."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tallybook.webhooks.events import EVENT_TYPES
from tallybook.webhooks.subscriptions import MAX_DESCRIPTION, MAX_URL_LENGTH

ALLOW_HTTP_ENV = "TALLYBOOK_WEBHOOKS_ALLOW_HTTP"


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=MAX_URL_LENGTH, examples=["https://example.com/hooks"])
    types: list[str] = Field(
        default_factory=list,
        max_length=len(EVENT_TYPES),
        description=f"event types to receive (empty: all): {', '.join(EVENT_TYPES)}",
    )
    description: str | None = Field(
        default=None,
        max_length=MAX_DESCRIPTION,
        description="free text kept on the subscription (no control characters)",
    )
    allow_http: bool = Field(
        default=False,
        strict=True,  # true or false, not "yes" or 1
        description=f"http:// to a loopback host; only when the server sets {ALLOW_HTTP_ENV}=1",
    )


class SubscriptionOut(BaseModel):
    id: str
    program: str
    url: str
    types: list[str]
    status: str
    created_at: str
    secret_hint: str = Field(description="the secret's last four characters")
    description: str | None = None
    disabled_reason: str | None = None


class CreatedOut(SubscriptionOut):
    secret: str = Field(description="whsec_...: signs every delivery; shown only this once")


class SubscriptionListOut(BaseModel):
    subscriptions: list[SubscriptionOut]


class DeliveryOut(BaseModel):
    subscription: str
    position: str
    event_id: str
    type: str
    accounts: list[str]
    status: str
    attempts: int
    at: str
    last_code: int | None = None
    last_error: str | None = None
    last_latency_ms: int | None = None
    log: list[dict[str, Any]]


class DeliveryPageOut(BaseModel):
    deliveries: list[DeliveryOut]
    cursor: str | None = None

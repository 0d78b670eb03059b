"""Webhook values: outbound events, subscriptions and their deliveries (pure; no I/O).

``tallybook.webhooks`` derives, fans out and delivers them; how they are
stored is :mod:`tallybook.store.records.webhooks` and
:mod:`tallybook.store.records.webhook_events`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

#: a JSON value as the store keeps it (the port's ``Value``: no floats)
Value: TypeAlias = "str | int | bool | list[Value] | dict[str, Value] | None"

#: a delivery's position in its subscription's queue: a log position
#: (``{number}.{index}``), or, for an event taken in after a predecessor read
#: later than it from another shard, ``{root}~{depth}~{own}`` (``webhooks/order.py``)
POSITION_PATTERN = r"^\d{1,40}\.\d{3}(~\d{6,}~\d{1,40}\.\d{3})?$"
#: the digits of a position's numbers as stored (``store/records/webhook_changes``)
POSITION_NUMBER_DIGITS = 40


def short_position(position: str) -> str:
    """A position as the CLI's table shows it: its numbers without leading zeros
    (40 digits each did not leave the other columns room at 80 columns)."""
    return "~".join(_number_part(part, strip=True) for part in position.split("~"))


def stored_position(position: str) -> str:
    """The stored form of a position given short (as tables show it) or whole."""
    return "~".join(_number_part(part, strip=False) for part in position.split("~"))


def _number_part(part: str, *, strip: bool) -> str:
    number, dot, index = part.partition(".")
    if not dot:  # the depth of a chained position keeps its own width
        return part
    number = (number.lstrip("0") or "0") if strip else number.zfill(POSITION_NUMBER_DIGITS)
    return f"{number}.{index}"


#: subscription statuses
ACTIVE: Final = "active"
DISABLED: Final = "disabled"
#: a delivery not yet delivered or dead-lettered
PENDING: Final = "pending"


@dataclass(frozen=True, slots=True)
class Event:
    """One outbound event: what receivers get as the ``data`` of a webhook."""

    id: str
    type: str
    program: str
    #: the customer accounts it concerns, in leg order (empty for program events)
    accounts: tuple[str, ...]
    #: when the ledger recorded the change (ISO 8601, UTC)
    at: str
    data: dict[str, Value]

    def envelope(self) -> dict[str, Value]:
        """The webhook body (Standard Webhooks' ``type`` / ``timestamp`` / ``data``)."""
        return {
            "id": self.id,
            "type": self.type,
            "timestamp": self.at,
            "program": self.program,
            "accounts": list(self.accounts),
            "data": self.data,
        }


#: lane kinds: an account (its changes' ``account_seq``); and, for records written
#: before accounts were numbered, an account's fund (entries' ``seq``) and a hold
#: (1: placed, 2: settled)
ACCOUNT_LANE: Final = "account"
FUND_LANE: Final = "fund"
HOLD_LANE: Final = "hold"


@dataclass(frozen=True, slots=True)
class Lane:
    """A sequence the ledger numbers without gaps, which orders transaction events:
    the account ``id``, the fund ``fund`` of account ``id``, or the hold ``id``."""

    program: str
    kind: str
    id: str
    fund: str = ""


@dataclass(frozen=True, slots=True)
class Mark:
    """How far a lane's events are taken in: the last unit's ``seq`` on it and its
    last log position (a later unit must sort after it)."""

    seq: int
    position: str


@dataclass(frozen=True, slots=True)
class Subscription:
    program: str
    id: str
    url: str
    #: event types it receives; empty means every type
    types: tuple[str, ...]
    status: str
    created_at: str
    secret_hint: str
    description: str | None = None
    disabled_reason: str | None = None
    allow_http: bool = False

    def wants(self, event_type: str) -> bool:
        return not self.types or event_type in self.types

    def public(self) -> dict[str, Any]:
        """Everything but the secret (its last four characters only)."""
        return {
            "id": self.id,
            "program": self.program,
            "url": self.url,
            "types": list(self.types),
            "status": self.status,
            "created_at": self.created_at,
            "secret_hint": self.secret_hint,
            "description": self.description,
            "disabled_reason": self.disabled_reason,
        }


def secret_hint(secret: str) -> str:
    """What listings show of a secret: its last four characters."""
    return "…" + secret[-4:]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at sending a delivery: when, the answer's code and latency, or the error."""

    at_us: int
    code: int | None
    latency_ms: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Queued:
    """A subscription's unfinished delivery, in its queue (log order)."""

    position: str
    event_id: str
    type: str
    accounts: tuple[str, ...]
    #: failed attempts so far (the queue row's version: an outcome is written once)
    attempts: int
    #: not before this time (µs since the epoch); 0: now
    next_us: int
    #: the first failed attempt's time (µs), 0 until one fails
    first_us: int
    at: str
    #: queued again by "resend": its record has attempts already
    resent: bool = False


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event's delivery to one subscription, with its last attempts."""

    subscription: str
    position: str
    event_id: str
    type: str
    accounts: tuple[str, ...]
    status: str
    attempts: int
    at: str
    last_code: int | None
    last_error: str | None
    last_latency_ms: int | None
    log: tuple[dict[str, Any], ...]

    def public(self) -> dict[str, Any]:
        return {
            "subscription": self.subscription,
            "position": self.position,
            "event_id": self.event_id,
            "type": self.type,
            "accounts": list(self.accounts),
            "status": self.status,
            "attempts": self.attempts,
            "at": self.at,
            "last_code": self.last_code,
            "last_error": self.last_error,
            "last_latency_ms": self.last_latency_ms,
            "log": list(self.log),
        }

"""Notifications: values and rules (pure; no I/O).

A notification belongs to an account and has a *type* (``LowBalance``,
``TierChanged``...). At most one notification per (account, type) is active;
a new one supersedes the old. What each type does is a :class:`TypeRule`
kept in the program's settings under ``"notifications"``:

- ``listed``: shown in the account's active list (a ``TopUp`` is not: it only
  dismisses ``LowBalance`` and is recorded in history);
- ``dismisses``: types this one dismisses when added;
- ``deliver``: pushed to the user through the delivery hook;
- ``expires_after_days``: an active one disappears by itself after that long.

``retention_days`` sets the TTL of history items. How many days before points
expire a ``PointsExpiring`` is raised is loyalty's setting (``expiry.warn_days``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from tallybook.errors import ValidationError

LOW_BALANCE = "LowBalance"
POINTS_EXPIRING = "PointsExpiring"
TIER_CHANGED = "TierChanged"
HOLD_EXPIRED = "HoldExpired"
TOP_UP = "TopUp"

MAX_PAYLOAD_BYTES = 16 * 1024
#: levels of objects and lists a payload may nest, itself included: DynamoDB
#: stores at most 32 levels in an item (the payload sits inside the history row
#: and webhook events), and a deeper value cannot be serialized back as JSON
MAX_PAYLOAD_DEPTH = 16
#: a payload number is below 10^38 in magnitude (38 digits), as the store keeps
_NUMBER_LIMIT = 10**38
MAX_RETENTION_DAYS = 3650
#: types one rule may dismiss: an add dismisses them all in its one storage
#: transaction (two actions each, five more of its own, at most 100 in all)
MAX_DISMISSES = 45
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.:\-]{0,63}")
_ID = re.compile(r"n-(\d{16})-([0-9a-f]{10})")


class Status(StrEnum):
    ACTIVE = "active"
    #: replaced by a newer notification of the same type (``dismissed_by`` is its id)
    SUPERSEDED = "superseded"
    DISMISSED = "dismissed"
    #: its own expiry passed while active
    EXPIRED = "expired"
    #: a type whose rule says ``listed: false``: recorded in history only
    UNLISTED = "unlisted"


class DismissReason(StrEnum):
    SUPERSEDED = "superseded"
    USER = "user"
    #: another type's rule dismisses this one (a TopUp dismisses LowBalance)
    RULE = "rule"
    #: the ledger saw the fund back at or above its threshold
    TOPPED_UP = "topped_up"
    #: the fund's low-balance threshold was cleared, or changed to one the fund
    #: is at or above now
    THRESHOLD_CHANGED = "threshold_changed"


@dataclass(frozen=True, slots=True)
class Notification:
    """One notification, as listed (active) or as recorded in history."""

    program: str
    account: str
    id: str
    type: str
    payload: dict[str, Any]
    created_at: datetime
    status: Status = Status.ACTIVE
    listed: bool = True
    expires_at: datetime | None = None
    dismissed_at: datetime | None = None
    #: the id of the notification that superseded or dismissed this one, or who did
    dismissed_by: str | None = None
    dismiss_reason: str | None = None
    #: ``delivered`` / ``failed`` once the delivery hook ran; ``None`` if not delivered
    delivery: str | None = None
    delivered_at: datetime | None = None
    delivery_error: str | None = None
    #: the idempotency key (event source id, SNS MessageId) it was added with
    source: str | None = None
    #: True when an add with an already-used idempotency key returned the original
    replay: bool = False


@dataclass(frozen=True, slots=True)
class TypeRule:
    listed: bool = True
    dismisses: tuple[str, ...] = ()
    deliver: bool = False
    expires_after_days: int | None = None


DEFAULT_TYPE_RULES: Mapping[str, TypeRule] = {
    LOW_BALANCE: TypeRule(deliver=True),
    POINTS_EXPIRING: TypeRule(deliver=True),
    TIER_CHANGED: TypeRule(deliver=True),
    HOLD_EXPIRED: TypeRule(deliver=True),
    TOP_UP: TypeRule(listed=False, dismisses=(LOW_BALANCE,)),
}


@dataclass(frozen=True, slots=True)
class NotificationRules:
    retention_days: int = 90
    types: Mapping[str, TypeRule] = field(default_factory=lambda: dict(DEFAULT_TYPE_RULES))
    #: the rule of a type that has none of its own
    default: TypeRule = TypeRule()

    def rule(self, type_: str) -> TypeRule:
        return self.types.get(type_, self.default)


def check_type(value: object) -> str:
    if not isinstance(value, str) or not _TYPE.fullmatch(value):
        raise ValidationError(
            f"notification type {str(value)[:40]!r} must be 1-64 letters, digits, "
            "'.', '_', ':' or '-', starting with a letter"
        )
    return value


def check_payload(value: object) -> dict[str, Any]:
    """A JSON object of strings, integers, booleans, null, lists and objects (no
    floats), nesting at most :data:`MAX_PAYLOAD_DEPTH` levels."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError("payload must be a JSON object")
    _check_json(value, "payload", 1)
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > MAX_PAYLOAD_BYTES:
        raise ValidationError(f"payload is {size} bytes; at most {MAX_PAYLOAD_BYTES}")
    return value


def _check_json(value: object, path: str, depth: int) -> None:
    if isinstance(value, str):
        _check_text(value, path)
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, list | dict) and depth > MAX_PAYLOAD_DEPTH:
        raise ValidationError(
            f"{path}: the payload nests more than {MAX_PAYLOAD_DEPTH} levels of objects and lists"
        )
    if isinstance(value, int):
        if not -_NUMBER_LIMIT < value < _NUMBER_LIMIT:  # never str(): it fails past 4300 digits
            raise ValidationError(f"{path}: a number has at most 38 digits")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k:  # DynamoDB refuses an empty map key
                raise ValidationError(f"{path}: keys must be non-empty strings")
            _check_text(k, path)
            _check_json(v, f"{path}.{k}", depth + 1)
        return
    if isinstance(value, float):
        raise ValidationError(
            f"{path}: numbers must be integers (amounts in minor units); got {value!r}"
        )
    raise ValidationError(f"{path}: unsupported value of type {type(value).__name__}")


def _check_text(text: str, path: str) -> None:
    """Text that has a UTF-8 form: JSON's ``"\\ud800"`` (a lone surrogate) has none."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(
                f"{path}: text must be valid Unicode (a lone surrogate)"
            ) from None


def _int_setting(raw: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"notifications.{name} must be an integer from {low} to {high}")
    return value


def parse_type_rule(
    name: str, raw: object, base: TypeRule | None = None, *, stored: bool = False
) -> TypeRule:
    """A type's rule from settings; missing fields keep ``base``'s (or the defaults).

    ``stored``: a rule a program already holds, whose ``dismisses`` may be longer
    than a rule may now be set with (such a rule keeps working as it did)."""
    check_type(name)
    if not isinstance(raw, Mapping):
        raise ValidationError(f"notifications.types.{name} must be an object")
    unknown = set(raw) - {"listed", "dismisses", "deliver", "expires_after_days"}
    if unknown:
        raise ValidationError(f"notifications.types.{name}: unknown fields {sorted(unknown)}")
    rule = base or TypeRule()
    for flag in ("listed", "deliver"):
        if flag in raw and not isinstance(raw[flag], bool):
            raise ValidationError(f"notifications.types.{name}.{flag} must be true or false")
    dismisses = raw.get("dismisses", list(rule.dismisses))
    if not isinstance(dismisses, list | tuple):
        raise ValidationError(f"notifications.types.{name}.dismisses must be a list of types")
    if not stored and len(dismisses) > MAX_DISMISSES:
        raise ValidationError(
            f"notifications.types.{name}.dismisses lists at most {MAX_DISMISSES} types "
            "(an add dismisses them in one storage transaction)"
        )
    for t in dismisses:
        check_type(t)
    if name in dismisses:
        raise ValidationError(f"notifications.types.{name} cannot dismiss itself")
    expires = raw.get("expires_after_days", rule.expires_after_days)
    if expires is not None and (
        isinstance(expires, bool) or not isinstance(expires, int) or not 1 <= expires <= 3650
    ):
        raise ValidationError(
            f"notifications.types.{name}.expires_after_days must be an integer from 1 to 3650"
        )
    return replace(
        rule,
        listed=raw.get("listed", rule.listed),
        deliver=raw.get("deliver", rule.deliver),
        dismisses=tuple(dict.fromkeys(dismisses)),
        expires_after_days=expires,
    )


def parse_rules(raw: object, *, stored: bool = False) -> NotificationRules:
    """The rules from a program's ``settings["notifications"]``, over the defaults
    (``stored``: as a program holds them, see :func:`parse_type_rule`)."""
    if raw is None:
        return NotificationRules()
    if not isinstance(raw, Mapping):
        raise ValidationError("settings.notifications must be an object")
    unknown = set(raw) - {"retention_days", "types", "default"}
    if unknown:
        raise ValidationError(f"settings.notifications: unknown fields {sorted(unknown)}")
    types = dict(DEFAULT_TYPE_RULES)
    raw_types = raw.get("types", {})
    if not isinstance(raw_types, Mapping):
        raise ValidationError("notifications.types must be an object of type -> rule")
    for name, rule in raw_types.items():
        types[name] = parse_type_rule(name, rule, types.get(name), stored=stored)
    default = TypeRule()
    if "default" in raw:
        default = parse_type_rule("default", raw["default"], stored=stored)
    return NotificationRules(
        retention_days=_int_setting(raw, "retention_days", 90, 1, MAX_RETENTION_DAYS),
        types=types,
        default=default,
    )


def rules_to_settings(rules: NotificationRules) -> dict[str, Any]:
    def rule(r: TypeRule) -> dict[str, Any]:
        return {
            "listed": r.listed,
            "dismisses": list(r.dismisses),
            "deliver": r.deliver,
            "expires_after_days": r.expires_after_days,
        }

    return {
        "retention_days": rules.retention_days,
        "types": {name: rule(r) for name, r in sorted(rules.types.items())},
        "default": rule(rules.default),
    }


def make_id(created_us: int, token: str) -> str:
    """Ids carry their creation time, so an id alone locates its history item."""
    return f"n-{created_us:016d}-{token}"


def created_us_of(notification_id: str) -> int | None:
    """The creation time inside a notification id, or ``None`` if it is not one."""
    match = _ID.fullmatch(notification_id)
    return int(match.group(1)) if match else None


def threshold_crossing(before: int, after: int, threshold: int) -> bool | None:
    """``True`` when a balance drops below ``threshold``, ``False`` when it climbs back
    to it or above, ``None`` when it stays on the same side."""
    if before >= threshold > after:
        return True
    if before < threshold <= after:
        return False
    return None

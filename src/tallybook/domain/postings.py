"""Pure posting rules: validation, balancing per unit, and applying legs to funds."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tallybook.domain.ids import check_fund, check_id, is_system_account
from tallybook.domain.model import FundState, Leg, PostedLeg, Program
from tallybook.domain.money import MAX_AMOUNT, check_signed_amount
from tallybook.errors import InsufficientFunds, NotFound, ValidationError

MAX_METADATA_KEYS = 16
MAX_METADATA_VALUE = 256
MAX_DESCRIPTION = 500
#: an account's own attributes (``Account.client_attributes``): at most 16
#: names of 1-64 characters, each naming a string of at most 256 characters;
#: the HTTP body (``OpenAccountIn``) and the Python API apply the same rule
MAX_ATTRIBUTES = 16
MAX_ATTRIBUTE_NAME = 64
MAX_ATTRIBUTE_VALUE = 256
#: legs of one transaction: each customer leg writes a head and an entry, so
#: this keeps a transaction well under DynamoDB's 100 actions
MAX_LEGS = 24


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata must be an object of string values")
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValidationError(f"metadata holds at most {MAX_METADATA_KEYS} keys")
    out: dict[str, str] = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not 0 < len(k) <= 64:
            raise ValidationError("metadata keys must be strings of 1-64 characters")
        if not isinstance(v, str) or len(v) > MAX_METADATA_VALUE:
            raise ValidationError(
                f"metadata values must be strings of at most {MAX_METADATA_VALUE} characters"
            )
        out[k] = v
    return out


def check_attributes(attributes: object) -> dict[str, str]:
    """An account's own attributes within :data:`MAX_ATTRIBUTES` (a copy)."""
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise ValidationError("attributes must be a mapping of names to values")
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValidationError(f"attributes hold at most {MAX_ATTRIBUTES} names")
    out: dict[str, str] = {}
    for k, v in attributes.items():
        if not isinstance(k, str) or not k:
            raise ValidationError("attribute names must be non-empty strings")
        if len(k) > MAX_ATTRIBUTE_NAME:
            raise ValidationError(
                f"attribute name {k[:40]!r} is longer than {MAX_ATTRIBUTE_NAME} characters"
            )
        if not isinstance(v, str) or len(v) > MAX_ATTRIBUTE_VALUE:
            raise ValidationError(
                f"attribute {k!r} must be a string of at most {MAX_ATTRIBUTE_VALUE} characters"
            )
        out[k] = v
    return out


def check_description(description: str | None) -> str | None:
    if description is None:
        return None
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ValidationError(f"description must be a string of at most {MAX_DESCRIPTION} chars")
    return description


def check_legs(program: Program, legs: Sequence[Leg], *, allow_empty: bool = False) -> None:
    """Legs name known funds, post each (account, fund) once and balance per unit."""
    if not legs and not allow_empty:
        raise ValidationError("a transaction needs at least one posting")
    if len(legs) > MAX_LEGS:
        raise ValidationError(f"a transaction holds at most {MAX_LEGS} postings")
    seen: set[tuple[str, str]] = set()
    totals: dict[str, int] = defaultdict(int)
    for leg in legs:
        if not is_system_account(leg.account):
            check_id(leg.account, "account")
        check_fund(leg.fund)
        check_signed_amount(leg.amount)
        spec = program.fund(leg.fund)
        if spec is None:
            raise NotFound(f"program {program.id} has no fund {leg.fund!r}")
        if (leg.account, leg.fund) in seen:
            raise ValidationError(
                f"account {leg.account} fund {leg.fund} appears twice in one transaction"
            )
        seen.add((leg.account, leg.fund))
        totals[spec.unit] += leg.amount
    unbalanced = {unit: total for unit, total in totals.items() if total != 0}
    if unbalanced:
        raise ValidationError(f"postings do not balance per unit: {unbalanced}")


#: ``json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)``, without
#: building an encoder per call (the text, and so every stored fingerprint, is the same)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def fingerprint(body: Mapping[str, Any]) -> str:
    """A stable hash of a request body: the same id with another body is a conflict."""
    return hashlib.sha256(_CANONICAL.encode(body).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class FundChange:
    """What a transaction does to one customer fund."""

    amount: int = 0
    held_delta: int = 0


def apply_change(
    program: Program,
    account: str,
    fund: str,
    state: FundState,
    change: FundChange,
    now_us: int,
) -> FundState:
    """The fund after ``change``; refuses to go below zero available unless overdraft.

    A posting (non-zero amount) takes the next sequence number and a timestamp
    strictly after the fund's last one, so history order equals sequence order.
    """
    spec = program.fund(fund)
    if spec is None:
        raise NotFound(f"program {program.id} has no fund {fund!r}")
    balance = state.balance + change.amount
    held = state.held + change.held_delta
    if held < 0:
        raise ValidationError(f"fund {fund} of {account} would hold a negative amount")
    if abs(balance) > MAX_AMOUNT * 1000:
        raise ValidationError(f"fund {fund} of {account} would exceed the balance limit")
    decreasing = change.amount < 0 or change.held_delta > 0
    if decreasing and not spec.allow_overdraft and balance - held < 0:
        needed = max(0, -change.amount) + max(0, change.held_delta)
        raise InsufficientFunds(
            f"insufficient funds in {fund} of {account}: available {state.available}, "
            f"needed {needed}"
        )
    if change.amount == 0:
        return replace(state, held=held)
    return FundState(
        balance=balance,
        held=held,
        seq=state.seq + 1,
        last_us=max(now_us, state.last_us + 1),
    )


def posted_leg(program: Program, leg: Leg, state: FundState | None) -> PostedLeg:
    spec = program.fund(leg.fund)
    assert spec is not None
    if state is None:
        return PostedLeg(leg.account, leg.fund, spec.unit, leg.amount)
    return PostedLeg(leg.account, leg.fund, spec.unit, leg.amount, state.balance, state.seq)

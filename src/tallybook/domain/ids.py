"""Identifier rules shared by every entity (programs, accounts, funds, transactions)."""

from __future__ import annotations

import re

from tallybook.errors import ValidationError

MAX_ID_LENGTH = 128
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]*")
_FUND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_UNIT = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")
SYSTEM_PREFIX = "@"


def check_progress(value: object) -> None:
    """A job's ``progress`` callback: a callable or ``None``, refused before the
    job starts (not a ``TypeError`` at its first call, with part of the work done)."""
    if value is not None and not callable(value):
        raise ValidationError(f"progress must be a callable or None (got {type(value).__name__})")


def check_flag(value: object, what: str) -> bool:
    """``value`` if it is a ``bool``: ``"no"`` or ``0`` would read as true or false."""
    if not isinstance(value, bool):
        raise ValidationError(f"{what} must be True or False (got {value!r})")
    return value


def check_id(value: object, what: str = "id", *, max_length: int = MAX_ID_LENGTH) -> str:
    """An id: 1-128 ASCII letters, digits, ``.``, ``_``, ``:`` or ``-``; no slashes.

    ``max_length`` is a shorter limit of some kinds (a hold id), named in the messages.
    """
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} is required (1-{max_length} characters)")
    if len(value) > max_length:
        raise ValidationError(f"{what} is longer than {max_length} characters")
    if not _ID.fullmatch(value):
        raise ValidationError(
            f"{what} {value[:40]!r} may hold only ASCII letters, digits, '.', '_', ':' and '-', "
            "and must start with a letter or digit"
        )
    return value


#: suffixes of ids tallybook derives from a hold or grant id: ``{hold}:capture``,
#: ``{hold}:void``, ``{hold}:expire``, ``{hold}:release``, ``{grant}:expire``
DERIVED_SUFFIXES = ("capture", "void", "expire", "release")
#: prefixes of ids tallybook derives for loyalty: ``order:{order}`` (an earn),
#: ``expire:{account}:{n}`` (points expiry), ``tier:{account}:{version}`` (a tier change)
DERIVED_PREFIXES = ("order", "expire", "tier")
RESERVED_RULE = (
    "ids ending in "
    + ", ".join(f"':{s}'" for s in DERIVED_SUFFIXES)
    + " or starting with "
    + ", ".join(f"'{p}:'" for p in DERIVED_PREFIXES)
    + " are reserved for the ids tallybook derives (hold capture, void, expiry and "
    "release, grant expiry, loyalty earns, point expiry and tier changes)"
)


def derived_id(base: str, suffix: str) -> str:
    """``{base}:{suffix}``, the id of what tallybook does to ``base`` (a hold, a grant)."""
    if suffix not in DERIVED_SUFFIXES:
        raise ValueError(suffix)
    return f"{base}:{suffix}"


def is_derived(txn_id: str) -> bool:
    """Whether ``txn_id`` lies in the namespace of derived ids (no client id does)."""
    head, sep, _ = txn_id.partition(":")
    if not sep:
        return False
    return head in DERIVED_PREFIXES or txn_id.rpartition(":")[2] in DERIVED_SUFFIXES


def check_client_txn_id(
    value: object, what: str = "transaction id", *, max_length: int = MAX_ID_LENGTH
) -> str:
    """A transaction or hold id chosen by a client: an id outside the derived namespace.

    Taking a derived id would block what tallybook does under it later (a
    client transfer named ``ord-7:capture`` made the capture of hold ``ord-7``
    a conflict, and a taken ``{hold}:expire`` kept its funds withheld).
    """
    txn_id = check_id(value, what, max_length=max_length)
    if is_derived(txn_id):
        raise ValidationError(f"{what} {txn_id[:40]!r} is reserved: {RESERVED_RULE}")
    return txn_id


def check_fund(value: object) -> str:
    if not isinstance(value, str) or not _FUND.fullmatch(value):
        raise ValidationError(
            f"fund {str(value)[:40]!r} must be 1-32 lowercase letters, digits or '_', "
            "starting with a letter"
        )
    return value


def check_unit(value: object, what: str = "unit") -> str:
    """A fund's unit; ``what`` names it as the caller's input does (``currency``)."""
    if not isinstance(value, str) or not _UNIT.fullmatch(value):
        raise ValidationError(f"{what} {str(value)[:40]!r} must be 1-16 letters, digits or '_'")
    return value


def is_system_account(account: str) -> bool:
    return account.startswith(SYSTEM_PREFIX)

"""Identifier rules shared by every entity (programs, accounts, funds, transactions)."""

from __future__ import annotations

import re

from tallybook.errors import ValidationError

MAX_ID_LENGTH = 128
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]*")
_FUND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_UNIT = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")
SYSTEM_PREFIX = "@"


def check_id(value: object, what: str = "id") -> str:
    """An id: 1-128 ASCII letters, digits, ``.``, ``_``, ``:`` or ``-``; no slashes."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} is required (1-{MAX_ID_LENGTH} characters)")
    if len(value) > MAX_ID_LENGTH:
        raise ValidationError(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if not _ID.fullmatch(value):
        raise ValidationError(
            f"{what} {value[:40]!r} may hold only ASCII letters, digits, '.', '_', ':' and '-', "
            "and must start with a letter or digit"
        )
    return value


def check_fund(value: object) -> str:
    if not isinstance(value, str) or not _FUND.fullmatch(value):
        raise ValidationError(
            f"fund {str(value)[:40]!r} must be 1-32 lowercase letters, digits or '_', "
            "starting with a letter"
        )
    return value


def check_unit(value: object) -> str:
    if not isinstance(value, str) or not _UNIT.fullmatch(value):
        raise ValidationError(f"unit {str(value)[:40]!r} must be 1-16 letters, digits or '_'")
    return value


def is_system_account(account: str) -> bool:
    return account.startswith(SYSTEM_PREFIX)

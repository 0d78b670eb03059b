"""Standard Webhooks signatures (https://www.standardwebhooks.com), v1 HMAC-SHA256.

A delivery carries three headers:

- ``webhook-id``: the event id (the same on every retry: receivers dedupe by it);
- ``webhook-timestamp``: seconds since the epoch when this attempt was signed;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``,
  keyed by the base64-decoded part of the secret after ``whsec_``; several
  space-separated signatures may appear (while a secret is rotated).

:func:`verify` is what a receiver runs; it needs nothing but the standard
library, so a receiver can copy this module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

from tallybook.errors import TallybookError

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
#: a receiver refuses a timestamp further than this from its clock (replay guard)
DEFAULT_TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(TallybookError, ValueError):
    """The request was not signed by the holder of the secret (or is too old).

    A :class:`~tallybook.errors.TallybookError` as every deliberate error is, and
    still a ``ValueError``, which it was first."""

    code = "webhook-not-verified"
    status = 400
    exit_code = 2


def new_secret() -> str:
    """A fresh secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError as exc:
        raise WebhookVerificationError("the secret is not whsec_ and base64") from exc


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,...`` signature of one message."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def sign(secret: str, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The three headers of a delivery of ``body``."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature(secret, msg_id, ts, body),
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: int | None = None,
) -> str:
    """Check a delivery's signature and timestamp; return its ``webhook-id``.

    ``headers`` may be any case (``webhook-id`` or ``Webhook-Id``); ``body`` is
    the raw request body, before any JSON parsing. Raises
    :class:`WebhookVerificationError` when a header is missing, the timestamp is
    more than ``tolerance`` seconds off, or no ``v1`` signature matches.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id = lower["webhook-id"]
        ts_text = lower["webhook-timestamp"]
        sigs = lower["webhook-signature"]
    except KeyError as exc:
        raise WebhookVerificationError(f"missing header {exc.args[0]}") from exc
    try:
        ts = int(ts_text)
    except ValueError as exc:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from exc
    current = int(time.time()) if now is None else now
    if abs(current - ts) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    expected = signature(secret, msg_id, ts, body).encode()
    for candidate in sigs.split(" "):
        # compared as bytes: compare_digest refuses a str that is not ASCII
        given = candidate.encode("utf-8", "surrogateescape")
        if candidate.startswith("v1,") and hmac.compare_digest(given, expected):
            return msg_id
    raise WebhookVerificationError("no matching v1 signature")

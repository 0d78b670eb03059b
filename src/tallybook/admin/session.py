"""Signed cookie sessions and CSRF tokens for the admin page.

A session cookie holds only ``{key id, program, nonce, issued at}`` as base64
JSON, followed by an HMAC-SHA256 of it. The secret comes from
``$TALLYBOOK_SESSION_SECRET``, or from the AWS Secrets Manager secret whose ARN
or name is ``$TALLYBOOK_SESSION_SECRET_ARN`` (read once, when the app is built:
what the SAM stack sets, so that every Lambda instance signs alike), or is drawn
at random when the app is built (then sessions end with the process). The key is
looked up again on every request (see ``auth.py``), so a revoked key is logged
out at once; the cookie itself never holds the API key's secret.

CSRF: each session has a random nonce; the token a form carries is an HMAC of
it, compared in constant time on every POST. The login form, which has no
session yet, gets the same treatment from a short-lived pre-login cookie.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

from tallybook.errors import ConfigError

SESSION_COOKIE = "tb_admin"
LOGIN_COOKIE = "tb_admin_login"
SECRET_ENV = "TALLYBOOK_SESSION_SECRET"  # noqa: S105 - the variable name, not a secret
SECRET_ARN_ENV = "TALLYBOOK_SESSION_SECRET_ARN"  # noqa: S105 - the variable name
#: a session lasts this long after login, whatever the activity (seconds)
SESSION_TTL = 8 * 3600
#: the login form must be posted within this time of being shown
LOGIN_TTL = 3600
_MIN_SECRET = 16


@dataclass(frozen=True, slots=True)
class Session:
    key_id: str
    program: str
    nonce: str
    issued_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _from_secrets_manager() -> str | None:
    """The value of the secret ``$TALLYBOOK_SESSION_SECRET_ARN`` names, if it names one."""
    secret_id = os.environ.get(SECRET_ARN_ENV, "").strip()
    if not secret_id:
        return None
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client: Any = boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=secret_id)
    except (BotoCoreError, ClientError) as exc:
        raise ConfigError(f"cannot read {SECRET_ARN_ENV} {secret_id}: {exc}") from exc
    text = str(value.get("SecretString") or "")
    if not text:
        raise ConfigError(f"{SECRET_ARN_ENV} {secret_id} holds no text")
    return text


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of a value from the request (any text) and one we made
    (``hmac.compare_digest`` refuses non-ASCII text with a TypeError)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


class SessionSigner:
    """Signs and checks session cookies and CSRF tokens with one secret."""

    def __init__(self, secret: bytes | str | None = None) -> None:
        if secret is None:
            shared = os.environ.get(SECRET_ENV) or _from_secrets_manager()
            secret = shared or secrets.token_bytes(32)
        raw = secret.encode("utf-8") if isinstance(secret, str) else secret
        if len(raw) < _MIN_SECRET:
            raise ConfigError(f"{SECRET_ENV} must hold at least {_MIN_SECRET} bytes")
        self._secret = raw

    def _mac(self, purpose: str, data: str) -> str:
        msg = f"{purpose}\x00{data}".encode()
        return _b64(hmac.new(self._secret, msg, hashlib.sha256).digest())

    # -- sessions -------------------------------------------------------------

    def new_session(self, key_id: str, program: str, now: float | None = None) -> Session:
        issued = int(time.time() if now is None else now)
        return Session(key_id, program, secrets.token_urlsafe(16), issued)

    def dumps(self, session: Session) -> str:
        body = {
            "k": session.key_id,
            "p": session.program,
            "n": session.nonce,
            "t": session.issued_at,
        }
        payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
        return f"{payload}.{self._mac('session', payload)}"

    def loads(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session a cookie holds, or ``None`` if absent, forged or expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        payload, mac = cookie.split(".")
        if not _same(mac, self._mac("session", payload)):
            return None
        try:
            body = json.loads(_unb64(payload))
            session = Session(str(body["k"]), str(body["p"]), str(body["n"]), int(body["t"]))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        age = (time.time() if now is None else now) - session.issued_at
        if not 0 <= age < SESSION_TTL:
            return None
        return session

    # -- CSRF -----------------------------------------------------------------

    def csrf_token(self, session: Session) -> str:
        return self._mac("csrf", session.nonce)

    def check_csrf(self, session: Session, token: str | None) -> bool:
        return bool(token) and _same(str(token), self.csrf_token(session))

    def login_nonce(self, now: float | None = None) -> str:
        """The pre-login cookie's value: a nonce and when it was issued, signed."""
        issued = int(time.time() if now is None else now)
        payload = f"{secrets.token_urlsafe(16)}.{issued}"
        return f"{payload}.{self._mac('login', payload)}"

    def login_token(self, cookie: str | None, now: float | None = None) -> str | None:
        """The CSRF token the login form must carry for this pre-login cookie."""
        if not cookie or cookie.count(".") != 2:
            return None
        nonce, issued, mac = cookie.split(".")
        if not _same(mac, self._mac("login", f"{nonce}.{issued}")):
            return None
        try:
            age = (time.time() if now is None else now) - int(issued)
        except ValueError:
            return None
        if not 0 <= age < LOGIN_TTL:
            return None
        return self._mac("login-csrf", nonce)

    def check_login(self, cookie: str | None, token: str | None) -> bool:
        expected = self.login_token(cookie)
        return expected is not None and bool(token) and _same(str(token), expected)

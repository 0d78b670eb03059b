"""Signed session cookies and CSRF tokens (pure: no store)."""

from __future__ import annotations

import pytest

from tallybook.admin.session import LOGIN_TTL, SESSION_TTL, SessionSigner
from tallybook.errors import ConfigError

NOW = 1_800_000_000.0


def test_a_session_round_trips_and_holds_no_secret() -> None:
    signer = SessionSigner(b"k" * 32)
    session = signer.new_session("abcdef0123456789", "shop", now=NOW)
    cookie = signer.dumps(session)
    assert signer.loads(cookie, now=NOW + 10) == session
    assert "tb_" not in cookie


def test_forged_tampered_expired_or_foreign_cookies_are_refused() -> None:
    signer = SessionSigner(b"k" * 32)
    cookie = signer.dumps(signer.new_session("abcdef0123456789", "shop", now=NOW))
    payload, mac = cookie.split(".")
    other = SessionSigner(b"j" * 32)
    for bad in (None, "", "x", payload, f"{payload}.{mac[:-2]}AA", f"{payload}x.{mac}", "a.b.c"):
        assert signer.loads(bad, now=NOW) is None
    assert other.loads(cookie, now=NOW) is None
    assert signer.loads(cookie, now=NOW + SESSION_TTL) is None
    assert signer.loads(cookie, now=NOW - 60) is None  # issued in the future


def test_csrf_tokens_belong_to_one_session() -> None:
    signer = SessionSigner(b"k" * 32)
    one = signer.new_session("abcdef0123456789", "shop", now=NOW)
    two = signer.new_session("abcdef0123456789", "shop", now=NOW)
    assert signer.check_csrf(one, signer.csrf_token(one))
    assert not signer.check_csrf(one, signer.csrf_token(two))
    assert not signer.check_csrf(one, "")
    assert not signer.check_csrf(one, None)


def test_login_tokens_expire_and_need_their_cookie() -> None:
    signer = SessionSigner(b"k" * 32)
    cookie = signer.login_nonce(now=NOW)
    token = signer.login_token(cookie, now=NOW)
    assert token is not None
    assert signer.login_token(cookie, now=NOW + LOGIN_TTL) is None
    assert signer.login_token(cookie.replace(".", "x", 1), now=NOW) is None
    other = signer.login_nonce(now=NOW)
    assert signer.login_token(other, now=NOW) != token
    assert not signer.check_login(None, token)


def test_the_secret_comes_from_the_environment_and_must_be_long_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TALLYBOOK_SESSION_SECRET", "s" * 32)
    a, b = SessionSigner(), SessionSigner()
    session = a.new_session("abcdef0123456789", "shop")
    assert b.loads(a.dumps(session)) == session  # shared across processes
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        SessionSigner("short")


def test_non_ascii_cookies_and_tokens_are_refused_not_raised() -> None:
    signer = SessionSigner(b"0123456789abcdef0123")
    session = signer.new_session("k1", "shop")
    cookie = signer.dumps(session)
    assert signer.loads(cookie[:-1] + "é") is None
    assert not signer.check_csrf(session, "é")
    assert signer.login_token("nonce.1.é") is None
    assert not signer.check_login(signer.login_nonce(), "é")

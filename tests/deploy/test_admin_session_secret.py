"""The admin page on several instances (Lambda): a session signed by one must hold
on another. The SAM stack names a shared secret in TALLYBOOK_SESSION_SECRET_ARN."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from tallybook.admin.session import SECRET_ARN_ENV, SECRET_ENV, SessionSigner
from tallybook.errors import ConfigError

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AdminSessionSecret-abc"


class FakeSecrets:
    def __init__(self, value: str) -> None:
        self.value = value
        self.asked: list[str] = []

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.asked.append(SecretId)
        return {"SecretString": self.value}


@pytest.fixture
def secrets_manager(monkeypatch: pytest.MonkeyPatch) -> FakeSecrets:
    fake = FakeSecrets("s" * 64)
    monkeypatch.setattr(boto3, "client", lambda service, **kw: fake)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.setenv(SECRET_ARN_ENV, ARN)
    return fake


def test_two_instances_without_a_secret_do_not_accept_each_other_s_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SECRET_ARN_ENV, raising=False)
    one, other = SessionSigner(), SessionSigner()
    cookie = one.dumps(one.new_session("k1", "shop"))
    assert one.loads(cookie) is not None
    assert other.loads(cookie) is None


def test_instances_share_the_secret_named_by_its_arn(secrets_manager: FakeSecrets) -> None:
    one, other = SessionSigner(), SessionSigner()
    cookie = one.dumps(one.new_session("k1", "shop"))
    session = other.loads(cookie)
    assert session is not None
    assert (session.key_id, session.program) == ("k1", "shop")
    assert secrets_manager.asked == [ARN, ARN]


def test_the_plain_variable_wins_and_an_empty_secret_is_refused(
    secrets_manager: FakeSecrets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "p" * 32)
    SessionSigner()
    assert secrets_manager.asked == []
    monkeypatch.delenv(SECRET_ENV)
    secrets_manager.value = ""
    with pytest.raises(ConfigError, match=SECRET_ARN_ENV):
        SessionSigner()


def test_a_replaced_secret_applies_to_instances_started_after_it(
    secrets_manager: FakeSecrets,
) -> None:
    """docs/deploy.md: each instance reads the secret once, when it starts, so replacing
    the value signs agents out only on instances started afterwards (it said at once)."""
    running = SessionSigner()
    cookie = running.dumps(running.new_session("k1", "shop"))
    secrets_manager.value = "n" * 64
    assert running.loads(cookie) is not None  # the old instance still takes it
    started_after = SessionSigner()
    assert started_after.loads(cookie) is None
    assert running.loads(started_after.dumps(started_after.new_session("k1", "shop"))) is None

"""Webhook secrets at rest: sealed under the server key, never stored in plain text;
key rotation, plain-text items of older versions, the SQLite key file, and the
clear refusals when the key is missing or wrong."""

from __future__ import annotations

import base64
import json
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tallybook.ledger import Ledger
from tallybook.store import keys
from tallybook.store.port import ItemStore
from tallybook.webhooks.delivery import RetryPolicy
from tallybook.webhooks.vault import (
    KEY_ENV,
    KEY_FILE_SUFFIX,
    KEY_SECRET_ENV,
    Keyring,
    WebhookKeyError,
    keyring_for,
    new_key,
)

from .receiver import Receiver, running_receiver

FAST = RetryPolicy(base_seconds=0.01, cap_seconds=0.05, timeout_seconds=5.0)
OLD, NEW = new_key(), new_key()


def _stored(ledger: Ledger, sub_id: str) -> dict[str, object]:
    item = ledger.store.get(keys.webhook_subscription("shop", sub_id))
    assert item is not None
    return dict(item)


def _credit_and_deliver(ledger: Ledger, receiver: Receiver, txn: str) -> None:
    ledger.transactions.credit("shop", "alice", "cash", 100, txn_id=txn)
    worker = ledger.webhooks.worker(policy=FAST)
    for _ in range(20):
        worker.run_once()
        if any(b["data"]["txn_id"] == txn for _, b in receiver.accepted):
            return
    raise AssertionError(f"{txn} was not delivered")


@contextmanager
def _subscribed(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Receiver, str]]:
    """Subscription ``s1`` (key ``OLD``) to a receiver, and account alice; every
    signature the receiver saw must verify."""
    monkeypatch.setenv(KEY_ENV, OLD)
    with running_receiver() as receiver:
        created = ledger.webhooks.create("shop", receiver.url, allow_http=True, sub_id="s1")
        receiver.secret = created.secret
        ledger.accounts.open("shop", "alice")
        yield receiver, created.secret
    assert receiver.rejected_signatures == 0


def test_the_stored_item_holds_no_plain_secret_and_delivery_verifies(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _subscribed(ledger, monkeypatch) as (receiver, secret):
        item = _stored(ledger, "s1")
        text = json.dumps(item)
        raw = base64.b64decode(secret.removeprefix("whsec_"))
        assert secret not in text
        assert secret.removeprefix("whsec_") not in text
        assert raw.hex() not in text
        assert "secret" not in item
        assert str(item["secret_sealed"]).startswith("v1:")
        assert item["secret_hint"] == "…" + secret[-4:]
        _credit_and_deliver(ledger, receiver, "t1")


def test_a_wrong_key_is_a_clear_error_and_rotation_keeps_deliveries(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _subscribed(ledger, monkeypatch) as (receiver, _):
        _credit_and_deliver(ledger, receiver, "t1")
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t2")
        monkeypatch.setenv(KEY_ENV, NEW)  # the old key forgotten: refused, nothing lost
        with pytest.raises(WebhookKeyError, match="not among the 1 key"):
            ledger.webhooks.worker(policy=FAST).run_once()
        assert [b["data"]["txn_id"] for _, b in receiver.accepted] == ["t1"]
        monkeypatch.setenv(KEY_ENV, f"{NEW},{OLD}")  # rotating: new first, old after
        _credit_and_deliver(ledger, receiver, "t2")
        assert ledger.webhooks.rekey() == 1
        assert ledger.webhooks.rekey("shop") == 0  # already under the current key
        monkeypatch.setenv(KEY_ENV, NEW)  # the old key dropped after the rekey
        _credit_and_deliver(ledger, receiver, "t3")
    assert [b["data"]["txn_id"] for _, b in receiver.accepted] == ["t1", "t2", "t3"]


def test_a_sealed_secret_moved_to_another_subscription_does_not_open(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, OLD)
    ledger.webhooks.create("shop", "https://example.com/a", sub_id="a")
    ledger.webhooks.create("shop", "https://example.com/b", sub_id="b")
    stolen = _stored(ledger, "a")["secret_sealed"]
    b = {**_stored(ledger, "b"), "secret_sealed": stolen}
    ledger.store.put(b)  # type: ignore[arg-type]
    with pytest.raises(WebhookKeyError, match="altered or belongs to another subscription"):
        ledger.webhooks.subs.secret("shop", "b")


def test_a_plain_secret_of_an_older_version_is_read_then_sealed(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _subscribed(ledger, monkeypatch) as (receiver, secret):
        item = _stored(ledger, "s1")
        for name in ("secret_sealed", "secret_hint"):
            del item[name]
        ledger.store.put({**item, "secret": secret})  # type: ignore[arg-type]
        assert ledger.webhooks.get("shop", "s1").secret_hint == "…" + secret[-4:]
        _credit_and_deliver(ledger, receiver, "t1")  # read as it is
        ledger.webhooks.disable("shop", "s1")  # the next write seals it
        assert secret not in json.dumps(_stored(ledger, "s1"))
        ledger.webhooks.enable("shop", "s1")
        _credit_and_deliver(ledger, receiver, "t2")


def test_without_a_key_dynamodb_refuses_and_names_the_variable(
    ledger: Ledger, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if engine != "dynamodb":
        pytest.skip("SQLite keeps a key file beside the database")
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_SECRET_ENV, raising=False)
    with pytest.raises(WebhookKeyError, match=f"set {KEY_ENV}") as caught:
        ledger.webhooks.create("shop", "https://example.com/h")
    assert caught.value.status == 503
    assert ledger.webhooks.list("shop") == []


def test_a_malformed_key_is_refused(store: ItemStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "too-short")
    with pytest.raises(WebhookKeyError, match=f"{KEY_ENV}: each key must be at least 32"):
        keyring_for(store)
    monkeypatch.setenv(KEY_ENV, f"{OLD},")
    with pytest.raises(WebhookKeyError, match="at least 32"):
        keyring_for(store)


@contextmanager
def _sqlite_shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Ledger, Path]]:
    """A SQLite ledger with program shop and no server key but its key file (and
    that key file's path, made or not)."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_SECRET_ENV, raising=False)
    db = tmp_path / "ledger.db"
    with Ledger.open(f"sqlite:///{db}") as ledger:
        ledger.programs.create("shop")
        yield ledger, Path(f"{db}{KEY_FILE_SUFFIX}")


def test_sqlite_without_a_key_makes_a_private_key_file_beside_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _sqlite_shop(tmp_path, monkeypatch) as (ledger, key_file), running_receiver() as receiver:
        receiver.secret = ledger.webhooks.create("shop", receiver.url, allow_http=True).secret
        ledger.accounts.open("shop", "alice")
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        with Ledger.open(ledger.store.describe()) as again:  # another process's view
            _credit_and_deliver(again, receiver, "t1")
        key_file.chmod(0o644)
        with pytest.raises(WebhookKeyError, match="chmod 600"):
            keyring_for(ledger.store)
    assert receiver.rejected_signatures == 0


def test_sqlite_without_its_key_file_refuses_to_deliver_or_rekey_and_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key file lost (or not restored with the database) was made again by the
    next delivery pass or rekey: a new key that opens no secret, which then stood
    in the way of the backup's; the pass said to "add that key (old keys go after
    the current one, comma-separated)", as if it were a list. Now only sealing
    makes the file, and reading a sealed secret without it names the file."""
    with _sqlite_shop(tmp_path, monkeypatch) as (ledger, key_file):
        with pytest.raises(WebhookKeyError, match=f"key file {key_file} does not exist"):
            ledger.webhooks.rekey()  # nothing to seal: no key made for nothing
        assert not key_file.exists()
        ledger.webhooks.create("shop", "http://127.0.0.1:9/h", allow_http=True, sub_id="s1")
        saved = key_file.read_text()
        key_file.unlink()
        for run in (ledger.webhooks.worker(policy=FAST).run_once, ledger.webhooks.rekey):
            with pytest.raises(WebhookKeyError, match=f"key file {key_file} does not exist"):
                run()
            assert not key_file.exists()
        key_file.write_text(saved)
        key_file.chmod(0o600)
        assert ledger.webhooks.rekey() == 0  # the backup's key opens it again


def test_sqlite_rekey_seals_a_plain_secret_of_an_older_version_making_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Earlier versions kept no key file: rekey, run once after upgrading, makes it."""
    with _sqlite_shop(tmp_path, monkeypatch) as (ledger, key_file):
        secret = ledger.webhooks.create("shop", "https://example.com/h", sub_id="s1").secret
        item = _stored(ledger, "s1")
        for name in ("secret_sealed", "secret_hint"):
            del item[name]
        ledger.store.put({**item, "secret": secret})  # type: ignore[arg-type]
        key_file.unlink()
        assert ledger.webhooks.rekey() == 1
        assert secret not in json.dumps(_stored(ledger, "s1"))
        assert ledger.webhooks.subs.secret("shop", "s1") == secret


def test_a_keyring_seals_with_its_first_key_and_opens_with_any() -> None:
    old, new = Keyring.parse(OLD, "old"), Keyring.parse(f"{NEW},{OLD}", "rotating")
    sealed = old.seal("whsec_x", "ctx")
    assert new.open(sealed, "ctx") == "whsec_x"
    assert not new.is_current(sealed)
    assert new.is_current(new.seal("whsec_x", "ctx"))
    assert old.seal("whsec_x", "ctx") != sealed  # a fresh nonce each time


def test_the_key_can_come_from_secrets_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SAM stack's way: TALLYBOOK_WEBHOOK_KEY_SECRET names the secret (moto
    stands in for Secrets Manager, which is not what is tested here)."""
    import boto3
    from moto import mock_aws

    from tallybook.store.memory import MemoryStore

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        arn = boto3.client("secretsmanager").create_secret(
            Name=f"webhook-key-{new_key()[:8]}", SecretString=f"{NEW},{OLD}"
        )["ARN"]
        monkeypatch.setenv(KEY_SECRET_ENV, arn)
        ring = keyring_for(MemoryStore())
        assert ring.open(Keyring.parse(OLD, "old").seal("whsec_x", "c"), "c") == "whsec_x"
        assert ring.is_current(Keyring.parse(NEW, "new").seal("whsec_x", "c"))
        assert ring.source == f"{KEY_SECRET_ENV} {arn}"
        monkeypatch.setenv(KEY_SECRET_ENV, "no-such-secret")
        with pytest.raises(WebhookKeyError, match=f"cannot read {KEY_SECRET_ENV} no-such-secret"):
            keyring_for(MemoryStore())


def test_rekey_seals_every_secret_that_opens_and_names_those_that_do_not(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: the first secret no key opened raised and the ones after it were not sealed
    from tallybook.webhooks.vault import RekeyIncomplete

    lost = new_key()
    for sub_id, key in (("a1", OLD), ("a2", lost), ("a3", OLD)):
        monkeypatch.setenv(KEY_ENV, key)
        ledger.webhooks.create("shop", "http://127.0.0.1:9/h", allow_http=True, sub_id=sub_id)
    monkeypatch.setenv(KEY_ENV, f"{NEW},{OLD}")
    with pytest.raises(RekeyIncomplete) as raised:
        ledger.webhooks.rekey()
    assert raised.value.sealed == 2
    assert [(p, s) for p, s, _ in raised.value.failed] == [("shop", "a2")]
    assert raised.value.exit_code == 2
    current = keyring_for(ledger.store)
    assert [
        s
        for s in ("a1", "a2", "a3")
        if current.is_current(str(_stored(ledger, s)["secret_sealed"]))
    ] == ["a1", "a3"]
    monkeypatch.setenv(KEY_ENV, f"{NEW},{lost}")  # OLD dropped: a1 and a3 still open
    assert ledger.webhooks.rekey() == 1

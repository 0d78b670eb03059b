"""The webhooks Lambda on DynamoDB Local: stream batches as Lambda hands them over."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.webhooks import lambda_stream
from tallybook.webhooks.delivery import RetryPolicy
from tallybook.webhooks.vault import KEY_ENV, WebhookKeyError, new_key

from .receiver import running_receiver
from .workload import stream_pages


@pytest.fixture
def quick_lambda(ledger: Ledger, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lambda's worker is this ledger's, retrying after 10-20 ms (DynamoDB only:
    the stream is DynamoDB's)."""
    if engine != "dynamodb":
        pytest.skip("the stream is DynamoDB's")
    worker = ledger.webhooks.worker(policy=RetryPolicy(base_seconds=0.01, cap_seconds=0.02))
    monkeypatch.setattr(lambda_stream, "_worker", worker)


@pytest.mark.usefixtures("quick_lambda")
def test_the_lambda_fans_out_stream_batches_and_retries_on_schedule(ledger: Ledger) -> None:
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        receiver.fail_count = 1
        ledger.accounts.open("shop", "alice")
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t2")
        results = [lambda_stream.handler({"Records": b}, None) for b in stream_pages(ledger)]
        assert sum(r["events"] for r in results) == 2
        assert sum(r["failed"] for r in results) == 1  # t1's first attempt got a 500
        # the same batches again (Lambda retrying): nothing new is stored
        again = [lambda_stream.handler({"Records": b}, None) for b in stream_pages(ledger)]
        assert sum(r["events"] for r in again) == 0
        for _ in range(50):
            lambda_stream.handler({"source": "aws.events"}, None)
            if len(receiver.ids()) == 2:
                break
    assert [b["data"]["txn_id"] for _, b in receiver.accepted] == ["t1", "t2"]
    assert receiver.rejected_signatures == 0


@pytest.mark.usefixtures("quick_lambda")
def test_without_a_usable_key_stream_batches_are_kept_and_the_schedule_fails(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_receiver() as receiver:
        receiver.secret = ledger.webhooks.create("shop", receiver.url, allow_http=True).secret
        ledger.accounts.open("shop", "alice")
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
        key = os.environ.get(KEY_ENV, "")
        monkeypatch.setenv(KEY_ENV, new_key())  # not the key that sealed the secret
        results = [lambda_stream.handler({"Records": b}, None) for b in stream_pages(ledger)]
        assert sum(r["events"] for r in results) == 1  # fanned out, the batch not failed
        assert any("not among" in r.get("error", "") for r in results)
        with pytest.raises(WebhookKeyError):
            lambda_stream.handler({"source": "aws.events"}, None)
        monkeypatch.setenv(KEY_ENV, key)
        lambda_stream.handler({"source": "aws.events"}, None)
    assert [b["data"]["txn_id"] for _, b in receiver.accepted] == ["t1"]


@pytest.mark.parametrize(
    "event",
    [[], "reconcile", None, {"Records": "x"}, {"Records": {"a": 1}}, {"Records": ["x", 5]}],
)
def test_an_event_that_is_no_batch_nor_schedule_is_refused_before_the_store_opens(
    event: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-made invocation (``aws lambda invoke --payload '[]'``) raised
    ``AttributeError: 'list' object has no attribute 'get'`` (a ``Records`` of
    strings too), after opening the store."""
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'never.db'}")
    monkeypatch.setattr(lambda_stream, "_worker", None)
    with pytest.raises(ValidationError, match="a webhooks event is a JSON object"):
        lambda_stream.handler(event, None)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []

"""Inbound events: SNS envelopes and NDJSON batches; replays are no-ops."""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

import pytest

from tallybook.ledger import Ledger
from tallybook.services.notifications.ingest import (
    EventIngestor,
    RejectedMessage,
    parse_envelope,
    sns_confirmer,
)

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def envelope(message_id: str, account: str = "alice", **event: Any) -> dict[str, Any]:
    body = {"account": account, "type": "TopUp", "payload": {"amount": 500}, **event}
    return {
        "Type": "Notification",
        "MessageId": message_id,
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:tallybook",
        "Message": json.dumps(body),
    }


def test_sns_notification_and_replay(ledger: Ledger, alice: str) -> None:
    ingest = ledger.notifications.ingestor
    ledger.notifications.add("shop", alice, "LowBalance", {"fund": "cash"})
    first = ingest.ingest("shop", json.dumps(envelope("m-1")))
    assert first.status == "added"
    assert first.notification is not None
    assert ledger.notifications.list("shop", alice) == []  # TopUp dismissed LowBalance
    again = ingest.ingest("shop", json.dumps(envelope("m-1")).encode())
    assert again.status == "replayed"
    assert again.notification is not None
    assert again.notification.id == first.notification.id
    assert len(ledger.notifications.history("shop", alice).notifications) == 2
    assert ingest.stats.as_dict()["added"] == 1
    assert ingest.stats.as_dict()["replayed"] == 1


BAD = [
    ("not json", "not-json"),
    ("[1]", "not-an-object"),
    (json.dumps({"Type": "Notification", "Message": "{}"}), "missing-message-id"),
    (json.dumps({**envelope("m-2"), "Type": "Weird"}), "unknown-type"),
    (json.dumps({**envelope("m-3"), "Message": "{oops"}), "not-json"),
    (json.dumps(envelope("m-4", account="nobody")), "not-found"),
    (json.dumps(envelope("m-5", payload={"amount": 1.5})), "bad-payload"),
    (json.dumps(envelope("m-6", program="other")), "wrong-program"),
    (json.dumps(envelope("m 7")), "bad-message-id"),
    (json.dumps({**envelope("m-8"), "Type": "SubscriptionConfirmation"}), "bad-subscribe-url"),
]


def test_bad_envelopes_are_rejected_and_counted(ledger: Ledger, alice: str) -> None:
    ingest = ledger.notifications.ingestor
    for raw, reason in BAD:
        with pytest.raises(RejectedMessage) as caught:
            ingest.ingest("shop", raw)
        assert caught.value.reason == reason, raw
        assert caught.value.message.startswith(reason + ": ")
    assert ingest.stats.rejected == len(BAD)
    assert ingest.stats.reasons["not-json"] == 2
    assert ingest.stats.reasons["wrong-program"] == 1
    assert ledger.notifications.history("shop", alice).notifications == []


def test_an_event_with_a_misspelt_or_doubled_field_is_rejected_and_adds_nothing(
    ledger: Ledger, alice: str
) -> None:
    """A misspelt field was ignored: the event was added without its payload and
    its id used up, so the corrected event was an idempotency conflict; a field
    given under both its names was taken from one of them."""
    typo = {"account": alice, "type": "Promo", "paylaod": {"title": "2x"}}
    lines = [
        json.dumps({"id": "e-1", **typo}) + "\n",
        json.dumps({**envelope("m-1"), "Message": json.dumps(typo)}) + "\n",
        json.dumps({"id": "e-2", "account": alice, "Account": "bob", "type": "Promo"}) + "\n",
    ]
    report = ledger.notifications.ingestor.ingest_lines("shop", lines)
    assert [(line, reason) for line, reason, _ in report.rejected] == [
        (1, "unknown-field"),
        (2, "unknown-field"),
        (3, "duplicate-key"),
    ]
    assert "'paylaod'" in report.rejected[0][2]
    assert ledger.notifications.history("shop", alice).notifications == []
    fixed = {"id": "e-1", "account": alice, "type": "Promo", "payload": {"title": "2x"}}
    assert ledger.notifications.ingestor.ingest("shop", json.dumps(fixed)).status == "added"
    (added,) = ledger.notifications.list("shop", alice)
    assert added.payload == {"title": "2x"}


def test_subscription_confirmation(ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    url = "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=t"
    message = {"Type": "SubscriptionConfirmation", "MessageId": "s-1", "SubscribeURL": url}
    with caplog.at_level(logging.WARNING, "tallybook.events"):
        pending = ledger.notifications.ingestor.ingest("shop", message)
    assert pending.status == "pending_confirmation"
    # it was logged as "SNS subscription to None ..." and counted as ignored
    assert caplog.messages == [f"SNS subscription (no TopicArn given) awaits confirmation: {url}"]
    stats = ledger.notifications.ingestor.stats_for("shop").as_dict()
    assert (stats["pending_confirmation"], stats["ignored"]) == (1, 0)
    confirmed: list[str] = []
    ingest = EventIngestor(ledger.notifications, confirm=confirmed.append)
    assert ingest.ingest("shop", message).status == "confirmed"
    assert confirmed == [url]


@pytest.mark.parametrize(
    ("url", "visited"),
    [
        ("https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=t", True),
        ("https://sns.us-gov-west-1.amazonaws.com/?Action=ConfirmSubscription", True),
        ("https://sns.cn-north-1.amazonaws.com.cn/?Action=ConfirmSubscription", True),
        ("https://my-bucket.s3.amazonaws.com/confirm", False),
        ("https://sns.s3-us-west-2.amazonaws.com/confirm", False),
        ("https://amazonaws.com/", False),
        ("https://sns.us-east-1.amazonaws.com:8443/", False),
        ("http://sns.us-east-1.amazonaws.com/", False),
    ],
)
@pytest.mark.parametrize("engine", ["memory"])  # no storage: the URL is checked alone
def test_auto_confirm_visits_only_an_sns_host(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, url: str, visited: bool
) -> None:
    """Any https://*.amazonaws.com URL was visited (an S3 bucket's too)."""
    opened: list[str] = []

    class _Answer:
        def __enter__(self) -> _Answer:
            return self

        def __exit__(self, *_: object) -> None:
            return None

        def read(self) -> bytes:
            return b""

    def urlopen(target: str, timeout: float) -> _Answer:
        opened.append(target)
        return _Answer()

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    ingest = EventIngestor(ledger.notifications, confirm=sns_confirmer)
    message = {"Type": "SubscriptionConfirmation", "MessageId": "s-1", "SubscribeURL": url}
    if visited:
        assert ingest.ingest("shop", message).status == "confirmed"
    else:
        with pytest.raises(RejectedMessage) as refused:
            ingest.ingest("shop", message)
        assert refused.value.reason == "untrusted-subscribe-url"
        assert ingest.stats.reasons == {"untrusted-subscribe-url": 1}
    assert opened == ([url] if visited else [])


def test_ndjson_batch_continues_past_bad_lines(ledger: Ledger, alice: str) -> None:
    lines = [
        json.dumps(envelope("m-1")) + "\n",
        "garbage\n",
        "\n",
        json.dumps({"id": "e-2", "account": alice, "type": "TierChanged", "payload": {}}) + "\n",
        json.dumps(envelope("m-1")) + "\n",
        json.dumps(envelope("m-9", account="ghost")) + "\n",
    ]
    seen: list[int] = []
    report = ledger.notifications.ingestor.ingest_lines("shop", lines, progress=seen.append)
    stats = report.stats.as_dict()
    assert (stats["added"], stats["replayed"], stats["rejected"]) == (2, 1, 2)
    assert [(line, reason) for line, reason, _ in report.rejected] == [
        (2, "not-json"),
        (6, "not-found"),
    ]
    assert sum(seen) == sum(len(x) for x in lines)
    again = ledger.notifications.ingestor.ingest_lines("shop", lines)
    assert again.stats.added == 0
    assert again.stats.replayed == 3
    assert len(ledger.notifications.history("shop", alice).notifications) == 2


def test_a_text_line_holding_a_lone_surrogate_is_rejected_and_the_batch_goes_on(
    ledger: Ledger, alice: str
) -> None:
    """Text read with errors="surrogateescape" (bytes that are not UTF-8) ended the
    whole batch with a UnicodeEncodeError, and no report, at such a line."""
    undecodable = b'{"id": "e-1", "account": "alice", "type": "Promo", "payload": {"x": "caf\xe9"}}'
    lines = [undecodable.decode("utf-8", "surrogateescape") + "\n", json.dumps(envelope("m-2"))]
    report = ledger.notifications.ingestor.ingest_lines("shop", lines)
    assert [(line, reason) for line, reason, _ in report.rejected] == [(1, "bad-payload")]
    assert report.stats.added == 1
    assert [n.type for n in ledger.notifications.history("shop", alice).notifications] == ["TopUp"]


@pytest.mark.parametrize("as_bytes", [False, True], ids=["text", "bytes"])
def test_a_byte_order_mark_starting_the_lines_is_not_part_of_line_1(
    ledger: Ledger, alice: str, as_bytes: bool
) -> None:
    # was: text lines rejected line 1 (not-json: "Unexpected UTF-8 BOM"), and a file
    # read in binary (`tallybook events ingest`) whose BOM stood on a line of its own
    # rejected that line (exit 2)
    for first in (json.dumps(envelope("m-1")) + "\n", "\n"):
        lines = ["\ufeff" + first, json.dumps(envelope("m-2")) + "\n"]
        raw: list[str] | list[bytes] = [x.encode() for x in lines] if as_bytes else lines
        report = ledger.notifications.ingestor.ingest_lines("shop", raw)
        assert report.rejected == []
    assert len(ledger.notifications.history("shop", alice).notifications) == 2


def test_parse_envelope_accepts_message_object() -> None:
    env = parse_envelope(
        {"Type": "Notification", "MessageId": "x", "Message": {"account": "a", "type": "T"}}
    )
    assert env.event is not None
    assert (env.event.account, env.event.type, env.event.payload) == ("a", "T", {})

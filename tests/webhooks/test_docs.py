"""docs/webhooks.md says what the code does: its receiver example works, its
event types and retry schedule are the code's."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from docblocks import DocShell, blocks
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore
from tallybook.store.sqlite import SqliteStore
from tallybook.webhooks import sign
from tallybook.webhooks.delivery import RetryPolicy
from tallybook.webhooks.events import EVENT_TYPES
from tallybook.webhooks.fanout import MAX_SUBSCRIPTIONS
from tallybook.webhooks.sender import Response
from tallybook.webhooks.signing import new_secret
from tallybook.webhooks.vault import new_key as new_server_key

DOC = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()


def test_the_receiver_example_accepts_signed_requests_once() -> None:
    (code,) = blocks(DOC, "python")
    secret = new_secret()
    scope: dict[str, Any] = {}
    exec(code.replace('"whsec_..."', repr(secret)), scope)
    body = b'{"type":"transaction.posted"}'
    headers = sign(secret, "evt_1", body)
    assert scope["handle"](headers, body) == 204
    assert scope["handle"](headers, body) == 204
    assert scope["seen"] == {"evt_1"}
    assert scope["handle"](headers, body + b" ") == 400
    assert scope["handle"](sign(new_secret(), "evt_2", body), body) == 400


def test_every_event_type_is_documented() -> None:
    documented = re.findall(r"^\| `([a-z]+\.[a-z]+)` \|", DOC, flags=re.M)
    assert documented == list(EVENT_TYPES)


def test_the_retry_schedule_is_the_policys() -> None:
    policy = RetryPolicy()
    assert "5 s \u00d7 2^(n-1)" in DOC
    assert policy.base_seconds == 5
    assert policy.cap_seconds == 6 * 3600
    assert policy.jitter == 0.2
    assert policy.max_age_seconds == 3 * 86_400
    assert policy.timeout_seconds == 10
    assert f"at most {MAX_SUBSCRIPTIONS}" in DOC
    first_after = [5 * (2**n - 1) for n in (1, 2, 3, 5, 7, 9, 11, 13)]
    assert first_after == [5, 15, 35, 155, 635, 2555, 10235, 40955]


class _Receiver:
    """Accepts every delivery and keeps its body (no network)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> Response:
        self.bodies.append(body)
        return Response(204, 1)


def _documented_fields() -> dict[str, set[str]]:
    """Each event type's `data` fields as the table lists them ("as above": the row
    before's, and ``account_seq``/``account_previous``, which every account event has)."""
    fields: dict[str, set[str]] = {}
    previous: set[str] = set()
    for type_, cell in re.findall(r"^\| `([a-z]+\.[a-z]+)` \| .* \| (.*) \|$", DOC, flags=re.M):
        names = set(re.findall(r"`([a-z0-9_]+)`", re.sub(r"\([^)]*\)", "", cell)))
        if cell.startswith("as above"):
            names |= previous
        fields[type_] = names | {"account_seq", "account_previous"}
        previous = names
    return fields


def test_every_event_carries_the_data_fields_documented(tmp_path: Path) -> None:
    """Every event type's `data` has the fields the table lists, and no other."""
    # the SQLite engine hides items past their TTL by the real time: start at it
    clock = ManualClock(datetime.now(UTC).replace(minute=0, second=0, microsecond=0))
    ledger = Ledger(SqliteStore(tmp_path / "t.db"), clock=clock)
    ledger.programs.create("shop")
    ledger.loyalty.configure(
        "shop",
        {
            "expiry": {"days": 1},
            "tiers": [{"name": "base", "threshold": 0}, {"name": "gold", "threshold": 50}],
        },
    )
    ledger.billing.configure("shop", start=clock.now())
    ledger.webhooks.create("shop", "https://example.com/hooks")
    for account in ("a", "b", "c"):
        ledger.accounts.open("shop", account)
    ledger.wallet.credit("shop", "a", "cash", 1000, txn_id="c1")
    ledger.wallet.grant("shop", "a", 300, expires_in_days=1, txn_id="g1")
    ledger.wallet.credit_held("shop", "a", "store_credit", 400, release_in_days=1, txn_id="hc1")
    ledger.wallet.authorize("shop", "a", 100, hold_id="h1")
    ledger.wallet.capture("shop", "h1", 60)
    ledger.wallet.authorize("shop", "a", 100, hold_id="h2")
    ledger.wallet.void("shop", "h2")
    ledger.wallet.authorize("shop", "a", 100, hold_id="h3", expires_in=60)
    ledger.transactions.transfer("shop", "a", "b", "cash", 50, txn_id="t1")
    ledger.loyalty.earn("shop", "b", "o1", 10_000)
    ledger.loyalty.earn("shop", "c", "o2", 100)  # enrols c in the base tier
    note = ledger.notifications.add("shop", "b", "Promo", {"n": 1})
    ledger.notifications.dismiss("shop", "b", note.id)
    clock.advance(timedelta(days=2))
    ledger.wallet.reconcile("shop")
    ledger.wallet.expire_grants("shop")
    ledger.loyalty.expire("shop")
    ledger.billing.reports.run("shop", sink=DirectorySink(tmp_path), max_windows=1)
    receiver = _Receiver()
    ledger.webhooks.worker(sender=receiver, now=lambda: clock.now().timestamp()).run_once()
    documented = _documented_fields()
    seen: dict[str, set[str]] = {}
    for body in receiver.bodies:
        event = json.loads(body)
        seen.setdefault(event["type"], set()).update(event["data"])
    assert set(seen) == set(EVENT_TYPES)
    tiers = {
        e["data"]["txn_id"]: e["data"]
        for e in map(json.loads, receiver.bodies)
        if e["type"] == "tier.changed"
    }
    assert (tiers["order:o2"]["tier"], tiers["order:o2"]["previous_tier"]) == ("base", None)
    assert "a first earn enrolled them (`previous_tier` `null`; also into the base tier" in DOC
    # changes: only on a plain posting that moved a balance-based tier
    optional = {"order_id", "description", "metadata", "account_previous", "changes"}
    for type_, names in seen.items():
        assert names <= documented[type_], (type_, names - documented[type_])
        assert documented[type_] - names <= optional | {"account_seq"}, type_


def test_the_cli_examples_run_as_written_in_page_order(
    engine: str, store: ItemStore, tmp_path: Path
) -> None:
    """The page's `bash` blocks in a fresh folder on the default SQLite store (or a
    fresh DynamoDB table named by ``$TALLYBOOK_STORE``, with the server key the page
    says DynamoDB needs in ``$TALLYBOOK_WEBHOOK_KEY``): the
    subscription commands under ``set -e``, then the worker that runs until stopped,
    stopped with SIGTERM, then its one pass (the subscription is disabled by then, so
    no delivery leaves the machine)."""
    manage, worker = blocks(DOC, "bash")
    shell = DocShell(tmp_path, store)
    if engine == "dynamodb":  # no key file beside a database: the page says to set one
        shell.env["TALLYBOOK_WEBHOOK_KEY"] = new_server_key()
    result = shell.run(manage)
    assert re.search(r"^whsec_\S+$", result.stdout, flags=re.M), result.stdout
    assert "subscription sub_0123456789abcdef disabled" in result.stdout
    assert "sealed under the current key" in result.stdout
    forever, once = [line for line in worker.splitlines() if line.startswith("tallybook")]
    command = forever.split("#")[0].split()
    assert command == ["tallybook", "webhooks", "deliver"]
    started = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=shell.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    assert started.poll() is None  # runs until stopped
    started.send_signal(signal.SIGTERM)
    out, err = started.communicate(timeout=30)
    assert started.returncode == 0, out + err
    assert "Traceback" not in err
    assert once.split("#")[0].split() == [*command, "--once"]
    result = shell.run(once)
    assert result.stdout.startswith("delivered 0, failed 0")
    (sub,) = Ledger(store).webhooks.list("shop")
    assert (sub.id, sub.types) == (
        "sub_0123456789abcdef",
        ("transaction.posted", "hold.expired"),
    )


def test_the_envelope_sample_is_what_a_credit_sends(tmp_path: Path) -> None:
    """The page's JSON envelope is the body a credit of 1000 cash to alice (`t1`, her
    first posting) sends, but for the event's own id and time."""
    (sample,) = [json.loads(b) for b in blocks(DOC, "json")]
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    ledger = Ledger(SqliteStore(tmp_path / "t.db"), clock=clock)
    ledger.programs.create("shop")
    ledger.webhooks.create("shop", "https://example.com/hooks")
    ledger.accounts.open("shop", "alice")
    ledger.transactions.credit("shop", "alice", "cash", 1000, txn_id="t1")
    receiver = _Receiver()
    ledger.webhooks.worker(sender=receiver, now=lambda: clock.now().timestamp()).run_once()
    (body,) = receiver.bodies
    sent = json.loads(body)
    assert re.fullmatch(r"evt_[0-9a-f]{32}", sent.pop("id"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sent.pop("timestamp"))
    sample.pop("id")
    sample.pop("timestamp")
    assert sent == sample

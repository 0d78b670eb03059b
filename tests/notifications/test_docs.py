"""docs/notifications.md: its Python examples run as written, its rules sample is
the defaults (plus its `Promo`), and its storage table is the keys the store uses."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from pathlib import Path

import httpx

from docblocks import DocShell, blocks
from servers import free_port
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.port import ItemStore

DOC = (Path(__file__).resolve().parents[2] / "docs" / "notifications.md").read_text()


def test_the_python_examples_run_as_written_twice(tmp_path: Path) -> None:
    """The blocks used `ledger`, `t0` and `t1` without defining them (NameError as
    written); the first now opens its own store, and the page's blocks run in order,
    twice (every write replays or is a no-op)."""
    code = "\n".join(blocks(DOC, "python"))
    shell = DocShell(tmp_path)
    for _ in range(2):
        shell.python(code)
    with Ledger.open(f"sqlite:///{tmp_path / 'notifications-demo.db'}") as ledger:
        (note,) = ledger.notifications.history("shop", "alice").notifications
        assert note.status.value == "dismissed"
        assert ledger.notifications.rules("shop").retention_days == 30
        assert ledger.notifications.rules("shop").rule("TopUp").dismisses == ("LowBalance",)


def test_the_rules_sample_is_the_defaults_and_a_program_type(
    store: ItemStore, clock: ManualClock
) -> None:
    ledger = Ledger(store, clock=clock)
    ledger.programs.create("shop")
    assert "The defaults, with a `Promo` type added" in DOC
    (sample,) = blocks(DOC, "json")[:1]
    given = json.loads(sample)
    defaults = ledger.notifications.rules("shop")
    assert given["retention_days"] == defaults.retention_days
    promo = given["types"].pop("Promo")
    assert set(given["types"]) == set(defaults.types)
    for name, fields in [*given["types"].items(), ("default", given["default"])]:
        rule = defaults.default if name == "default" else defaults.rule(name)
        for field, value in fields.items():
            expected = tuple(value) if isinstance(value, list) else value
            assert getattr(rule, field) == expected, (name, field)
    ledger.notifications.set_rules("shop", {"types": {"Promo": promo}})
    assert ledger.notifications.rules("shop").rule("Promo").expires_after_days == 7


def test_the_storage_table_is_the_stores_keys() -> None:
    rows = dict(re.findall(r"^\| `(N#[A-Z]#[^`]*)` \| (.*) \|$", DOC, flags=re.M))
    assert set(rows) == {"N#A#{type}", "N#H#{created_us:016d}#{id}", "N#K#{key}"}
    assert "ACCT#{program}#{account}" in DOC
    assert keys.notification_active("shop", "alice", "Promo") == keys.Key(
        "ACCT#shop#alice", "N#A#Promo"
    )
    assert keys.notification_history("shop", "alice", 12, "n-12-ab").sk == (
        f"N#H#{12:016d}#n-12-ab"
    )
    assert keys.notification_idempotency("shop", "alice", "k1").sk == "N#K#k1"


def test_a_payload_is_the_same_object_in_any_key_order(
    store: ItemStore, clock: ManualClock
) -> None:
    """What the page says of payload key order: equal as objects on every engine, and
    the same payload in another key order is a replay, not a conflict."""
    assert "keys may come back in another order than sent" in " ".join(DOC.split())
    ledger = Ledger(store, clock=clock)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    sent = {"title": "x", "body": "y", "cta": "z", "zeta": {"b": 1, "a": 2}}
    added = ledger.notifications.add("shop", "alice", "Promo", sent, idempotency_key="k")
    assert ledger.notifications.get("shop", "alice", added.id).payload == sent
    again = dict(reversed(list(sent.items())))
    replay = ledger.notifications.add("shop", "alice", "Promo", again, idempotency_key="k")
    assert (replay.replay, replay.id) == (True, added.id)


def test_the_cli_examples_run_as_written_in_page_order(store: ItemStore, tmp_path: Path) -> None:
    """The page's `sh` blocks that run tallybook (not the AWS one), in a fresh folder on
    the default SQLite store (or a fresh DynamoDB table named by ``$TALLYBOOK_STORE``),
    each line under ``set -e``; what they print is the page's."""
    scripts = [b for b in blocks(DOC, "sh") if "aws " not in b]
    assert len(scripts) == 3
    out = DocShell(tmp_path, store).run("\n".join(scripts)).stdout
    added = re.search(r"^TierChanged (n-\d+-[0-9a-f]+) active$", out, flags=re.M)
    assert added is not None, out
    assert f"TierChanged {added[1]} dismissed" in out
    assert "no active LowBalance notification" in out
    assert "1 added, 0 replayed" in out
    rules = json.loads((tmp_path / "rules.json").read_text())
    assert rules["types"]["TopUp"]["dismisses"] == ["LowBalance"]
    ledger = Ledger(store)
    assert ledger.notifications.get("shop", "alice", added[1]).status.value == "dismissed"
    (promo,) = ledger.notifications.list("shop", "alice")
    assert (promo.type, promo.payload) == ("Promo", {"title": "2x points"})


def test_the_sns_examples_add_once_on_a_served_store(tmp_path: Path) -> None:
    """The inbound events block's `curl` (its `aws sns subscribe` needs AWS) against a
    server on a free port of 127.0.0.1 with a `write` key in ``$KEY``: added, then
    replayed; the page's JSON message sample is accepted too."""
    (block,) = [b for b in blocks(DOC, "sh") if "aws sns" in b]
    curl = block[block.index("curl ") :]
    (sample,) = [b for b in blocks(DOC, "json") if "TopicArn" in b]
    url = f"sqlite:///{tmp_path / 'tallybook.db'}"
    ledger = Ledger.open(url)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    _, secret = ledger.keys.create("shop", "write", "sns")
    port = free_port()
    shell = DocShell(tmp_path, KEY=secret)
    server = subprocess.Popen(
        ["tallybook", "serve", "--port", str(port), "--store", url],
        cwd=tmp_path,
        env=shell.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{base}/openapi.json", timeout=5)  # any answer: up
                break
            time.sleep(0.1)
        answers = []
        for _ in range(2):
            result = shell.run(curl.replace("http://127.0.0.1:8080", base), timeout=60)
            answers.append(json.loads(result.stdout))
        assert [a["status"] for a in answers] == ["added", "replayed"]
        assert answers[0]["notification"]["id"] == answers[1]["notification"]["id"]
        posted = httpx.post(
            f"{base}/v1/events/sns",
            content=sample,
            headers={"Content-Type": "text/plain"},
            auth=("sns", secret),
            timeout=10,
        )
        assert posted.status_code == 200, posted.text
        assert posted.json()["notification"]["payload"] == {"amount": 500}
    finally:
        server.terminate()
        server.wait(timeout=30)

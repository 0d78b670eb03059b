"""SQLite durability: ``synchronous=full`` by default, ``normal`` on request.

The crash test kills a writer process with SIGKILL in the middle of a workload
under each setting, then reopens the file: every posting the writer saw
acknowledged is there, and the invariants hold. A power cut cannot be simulated
on this machine (see docs/reliability.md for what SQLite guarantees there).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tallybook.errors import ConfigError, StoreValidationError
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore
from tallybook.store.url import open_store, parse_store_url

_PRAGMA = {0: "off", 1: "normal", 2: "full", 3: "extra"}


def _setting(store: SqliteStore) -> str:
    return _PRAGMA[store._conn().execute("PRAGMA synchronous").fetchone()[0]]


def test_a_fresh_store_is_durable_without_any_option(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/d.db")
    assert isinstance(store, SqliteStore)
    assert _setting(store) == "full"
    assert store.describe() == f"sqlite:///{tmp_path}/d.db"
    assert "power cut" in store.durability()
    store.close()


def test_the_url_can_trade_durability_for_speed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/n.db?synchronous=normal"
    store = open_store(url)
    assert isinstance(store, SqliteStore)
    assert _setting(store) == "normal"
    assert store.describe() == url  # reopening from describe() keeps the setting
    assert "process crash only" in store.durability()
    store.close()
    assert parse_store_url(f"sqlite:///{tmp_path}/n.db?synchronous=FULL").synchronous == "full"


@pytest.mark.parametrize("value", ["off", "fast", ""])
def test_unknown_settings_are_refused_with_the_accepted_ones(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url(f"sqlite:///{tmp_path}/x.db?synchronous={value}")
    assert "accepted: full, normal" in caught.value.message
    with pytest.raises(StoreValidationError, match="accepted: full, normal"):
        SqliteStore(tmp_path / "y.db", synchronous=value)


def test_the_cli_names_the_accepted_settings_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("tallybook")),
         "--store", f"sqlite:///{tmp_path}/x.db?synchronous=sometimes", "program", "show", "shop"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "accepted: full, normal" in done.stderr
    assert "Traceback" not in done.stderr


_WRITER = """
import sys
from tallybook.ledger import Ledger
ledger = Ledger.open(sys.argv[1])
i = 0
while True:
    i += 1
    ledger.transactions.credit("shop", "alice", "cash", 1, txn_id=f"t-{i}")
    ledger.transactions.transfer("shop", "alice", "bob", "cash", 1, txn_id=f"x-{i}")
    print(i, flush=True)
"""


@pytest.mark.parametrize("setting", ["full", "normal"])
def test_sigkill_mid_workload_loses_no_acknowledged_posting(tmp_path: Path, setting: str) -> None:
    url = f"sqlite:///{tmp_path}/crash.db?synchronous={setting}"
    with Ledger.open(url) as ledger:
        ledger.programs.create("shop")
        ledger.accounts.open("shop", "alice")
        ledger.accounts.open("shop", "bob")
    acknowledged = 0
    for _round in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, url],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        last = 0
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            last = int(line)
            if last >= 40:
                break
        os.kill(proc.pid, signal.SIGKILL)  # mid-workload: the writer is still posting
        proc.wait(timeout=30)
        assert last >= 40, "the writer did not get going"
        acknowledged = last
        with Ledger.open(url) as ledger:
            for i in range(1, acknowledged + 1):
                assert ledger.transactions.get("shop", f"t-{i}") is not None
                assert ledger.transactions.get("shop", f"x-{i}") is not None
            report = ledger.check.program("shop")
            assert report.ok, report
            balances = {
                a: {b.fund: b.balance for b in ledger.accounts.balances("shop", a)}
                for a in ("alice", "bob")
            }
            # every credit is followed by a transfer of the same cent: alice holds
            # at most one cent that has not moved on
            assert 0 <= balances["alice"]["cash"] <= 1

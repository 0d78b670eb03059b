"""SIGKILL the delivery worker at random points while the receiver fails for a
while: nothing is lost and every account's events still arrive in order."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tallybook.ledger import Ledger

from .receiver import running_receiver
from .test_delivery import FAST, assert_per_account_order, first_receipts
from .workload import key_of, run

WORKER = """
import sys
from tallybook import Ledger
from tallybook.webhooks.delivery import RetryPolicy
ledger = Ledger.open(sys.argv[1])
worker = ledger.webhooks.worker(
    policy=RetryPolicy(base_seconds=0.01, cap_seconds=0.05, timeout_seconds=5.0),
    lease_seconds=0.5,
)
print("ready", flush=True)
while True:
    worker.run_once()
"""


@pytest.mark.slow
def test_killed_workers_and_a_failing_receiver_lose_nothing(ledger: Ledger, tmp_path: Path) -> None:
    rng = random.Random(7)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        expected = run(ledger, 200, seed=11)
        receiver.fail_count = 30
        kills = 0
        while kills < 6 and len(receiver.ids()) < len(expected.events):
            proc = subprocess.Popen(
                [sys.executable, str(script), ledger.store.describe()],
                env=env,
                stdout=subprocess.PIPE,
            )
            assert proc.stdout is not None
            proc.stdout.readline()  # started: let it work for a random while
            time.sleep(rng.uniform(0.1, 1.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        worker = ledger.webhooks.worker(policy=FAST, lease_seconds=0.5)
        for _ in range(3000):
            stats = worker.run_once()
            if len(receiver.ids()) >= len(expected.events) and not stats.waiting:
                break
            if not (stats.delivered or stats.failed):
                time.sleep(0.05)
        bodies = first_receipts(receiver)
    assert kills >= 1
    assert receiver.failed_answers == 30
    assert receiver.rejected_signatures == 0
    assert Counter(key_of(b) for b in bodies) == expected.events
    assert_per_account_order(bodies)


def test_a_request_torn_by_a_killed_sender_is_not_counted_as_an_answer() -> None:
    """http.client writes a request's headers and body separately: a worker killed
    between the two leaves the receiver a body shorter than its content-length.
    That is no delivery (the worker got no answer and sends the event again), so
    it is neither a bad signature nor one of the failures the receiver was told
    to answer; under load the kills above landed there (``rejected_signatures``)."""
    with running_receiver() as receiver:
        receiver.fail_count = 1
        port = int(receiver.url.split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port)) as conn:
            head = "POST /hook HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n"
            conn.sendall(head.encode() + b'{"type":')
        deadline = time.monotonic() + 60
        while not (receiver.cut_short or receiver.rejected_signatures or receiver.failed_answers):
            assert time.monotonic() < deadline, "the receiver never handled the request"
            time.sleep(0.01)
    assert (receiver.cut_short, receiver.rejected_signatures, receiver.failed_answers) == (1, 0, 0)
    assert receiver.fail_count == 1
    assert receiver.accepted == []

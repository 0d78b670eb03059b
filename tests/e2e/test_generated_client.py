"""A Python client generated from /openapi.json (openapi-python-client) works as is.

``tallybook serve`` runs as a real process on 127.0.0.1 (a free port), over
the engine under test, with ``--metrics-bind`` on a second port. The test
fetches the OpenAPI document from it, generates a client package with the
``openapi-python-client`` command, imports it, and posts a credit and a debit
and reads the balances through it. It also checks what the separate metrics
address serves.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docblocks import blocks
from servers import free_port
from tallybook.ledger import Ledger

BIN = Path(sys.executable).parent
PACKAGE = "tallybook_api_client"
GENERATE = ("generate", "--path", "openapi.json", "--meta", "none", "--output-path")
HTTP_DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def server(ledger: Ledger, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(API base URL, metrics base URL) of a live ``tallybook serve``."""
    port, metrics_port = free_port(), free_port()
    log = (tmp_path / "serve.log").open("wb")
    cmd = [str(BIN / "tallybook"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--store", ledger.store.describe(), "--log-level", "warning"]
    cmd += ["--metrics-bind", f"127.0.0.1:{metrics_port}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if _get(f"{base}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        yield base, f"http://127.0.0.1:{metrics_port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _generate(base: str, out: Path) -> Any:
    status, spec = _get(f"{base}/openapi.json")
    assert status == 200
    (out / "openapi.json").write_bytes(spec)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    generated = out / PACKAGE
    result = subprocess.run(
        [str(BIN / "openapi-python-client"), *GENERATE, str(generated)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ledger" in os.listdir(generated / "api")
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))


def _run_doc_example(base: str, secret: str, out: Path) -> None:
    """The Python example of docs/http.md's "Generated clients", on this server."""
    (example,) = [b for b in blocks(HTTP_DOC.read_text(), "python") if PACKAGE in b]
    sys.path.insert(0, str(out))
    os.environ["KEY"] = secret  # `export KEY`, as the page says: the example reads no other name
    try:
        exec(example.replace("http://127.0.0.1:8080", base), {})
    finally:
        del os.environ["KEY"]
        sys.path.remove(str(out))


def test_generated_client_posts_and_reads(
    ledger: Ledger, server: tuple[str, str], tmp_path: Path
) -> None:
    base, metrics_base = server
    ledger.accounts.open("shop", "alice")
    _, secret = ledger.keys.create("shop", "read,write", "generated-client")
    package = _generate(base, tmp_path)
    try:
        post = importlib.import_module(f"{PACKAGE}.api.ledger.ledger_post_transaction")
        balances = importlib.import_module(f"{PACKAGE}.api.ledger.ledger_get_balances")
        models = importlib.import_module(f"{PACKAGE}.models")
        _run_doc_example(base, secret, tmp_path)  # docs/http.md, as written
        client = package.AuthenticatedClient(base_url=base, token=secret)
        with client:
            cash = {"account": "alice", "fund": "cash"}
            credit = models.LedgerCreditIn(type_="credit", amount=1_000, **cash)
            made = post.sync_detailed(client=client, body=credit, idempotency_key="gen-credit-1")
            assert made.status_code == 201, made.content
            assert made.parsed.id == "gen-credit-1"
            assert {(leg.account, leg.amount) for leg in made.parsed.legs} >= {("alice", 1_000)}
            again = post.sync_detailed(client=client, body=credit, idempotency_key="gen-credit-1")
            assert again.status_code == 201
            assert again.headers["idempotent-replayed"] == "true"
            debit = models.LedgerDebitIn(type_="debit", amount=250, **cash)
            spent = post.sync_detailed(client=client, body=debit, idempotency_key="gen-debit-1")
            assert spent.status_code == 201, spent.content
            read = balances.sync(account="alice", client=client)
            now = next(b for b in read.balances if b.fund == "cash")
            assert (now.balance, now.available) == (1_750, 1_750)
            too_much = models.LedgerDebitIn(
                type_="debit", account="alice", fund="cash", amount=10_000
            )
            refused = post.sync_detailed(client=client, body=too_much, idempotency_key="gen-d-2")
            assert refused.status_code == 422
            problem = json.loads(refused.content)
            assert problem["type"].startswith("https://tallybook.dev/problems/")
    finally:
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]
    cash_now = [b.balance for b in ledger.accounts.balances("shop", "alice") if b.fund == "cash"]
    assert cash_now == [1_750]
    # /metrics lives on the separate address only, without a key
    assert _get(f"{base}/metrics")[0] == 404
    status, text = _get(f"{metrics_base}/metrics")
    assert status == 200
    assert b'route="/v1/transactions",status="201"' in text
    assert shutil.which("tallybook", path=str(BIN))

"""docs/wallet.md and docs/loyalty.md: their examples run as written, and every
HTTP endpoint they name is in the OpenAPI document."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docblocks import DocShell, blocks
from tallybook.cli import app as cli_app
from tallybook.http.app import create_app
from tallybook.ledger import Ledger

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("wallet.md", "loyalty.md")


def doc_blocks(doc: str, lang: str) -> list[str]:
    return blocks((ROOT / "docs" / doc).read_text(), lang)


def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


@pytest.mark.parametrize("doc", DOCS)
def test_python_example_runs_twice(doc: str, tmp_path: Path) -> None:
    (code,) = doc_blocks(doc, "python")
    shell = DocShell(workdir(tmp_path))
    for _ in range(2):  # a second run replays every write instead of failing
        shell.python(code)


def test_wallet_example_runs_again_after_the_loyalty_example(tmp_path: Path) -> None:
    """Both examples use ./tallybook.db and alice: the loyalty example's earn and
    redeem (no wallet availability) are then in alice's wallet transactions."""
    (wallet,) = doc_blocks("wallet.md", "python")
    (loyalty,) = doc_blocks("loyalty.md", "python")
    shell = DocShell(workdir(tmp_path))
    for code in (wallet, loyalty, wallet):
        shell.python(code)


@pytest.mark.parametrize("doc", DOCS)
def test_cli_example_runs(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (script,) = doc_blocks(doc, "bash")
    monkeypatch.chdir(workdir(tmp_path))
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'docs.db'}")
    monkeypatch.delenv("TALLYBOOK_PROGRAM", raising=False)
    monkeypatch.delenv("TALLYBOOK_CHARGE_PROCESSOR", raising=False)
    runner = CliRunner()
    ran = 0
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            monkeypatch.setenv(name, value)
            continue
        assert words[0] == "tallybook", line
        result = runner.invoke(cli_app, words[1:])
        assert result.exit_code == 0, f"{line}\n{result.output}\n{result.exception!r}"
        ran += 1
    assert ran >= 10


def test_http_endpoints_are_in_the_openapi_document(tmp_path: Path) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'api.db'}")
    paths = create_app(ledger).openapi()["paths"]
    pattern = re.compile(r"\b(GET|POST|PUT|DELETE)\s+(/v1/[\w/{}.-]+)")
    text = "".join((ROOT / "docs" / doc).read_text() for doc in DOCS)
    named = [m.groups() for m in pattern.finditer(text)]
    assert len(named) >= 20
    for method, path in named:
        template = re.sub(r"\{[^}]+\}", "{}", path)
        operations = {
            m for p, ops in paths.items() if re.sub(r"\{[^}]+\}", "{}", p) == template for m in ops
        }
        assert method.lower() in operations, f"{method} {path} is not in the OpenAPI document"


def test_wallet_routes_list_their_body_fields_and_required_idempotency_key(
    tmp_path: Path,
) -> None:
    """docs/wallet.md's HTTP list: every `{field}` named is in the request body, every
    required field is named, and a route that requires `Idempotency-Key` says what it is
    (the debits route did not)."""
    doc = create_app(Ledger.open(f"sqlite:///{tmp_path / 'api.db'}")).openapi()
    schemas = doc["components"]["schemas"]
    (listing,) = doc_blocks("wallet.md", "text")
    checked = 0
    for line in listing.splitlines():
        m = re.match(r"POST\s+(/v1/\S+)\s*(\{[^}]*\})?\s*(.*)$", line)
        if m is None:
            continue
        path, fields, rest = m.groups()
        op = doc["paths"][path]["post"]
        header = next((p for p in op.get("parameters", []) if p["name"] == "Idempotency-Key"), None)
        assert ("Idempotency-Key =" in rest) == bool(header and header["required"]), line
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        refs = re.findall(r"#/components/schemas/(\w+)", json.dumps(body))
        schema = schemas[refs[0]] if refs else {"properties": {}, "required": []}
        named = set(re.findall(r"\w+", fields or ""))
        assert named <= set(schema["properties"]), line
        assert set(schema.get("required", [])) <= named, line
        checked += 1
    assert checked >= 8

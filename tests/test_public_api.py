"""The names ``tallybook`` exports are documented and carry docstrings."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tallybook

ROOT = Path(__file__).resolve().parent.parent
#: the ``Ledger`` attributes README.md and ``help(Ledger)`` name
CAPABILITIES = (
    "programs",
    "accounts",
    "transactions",
    "wallet",
    "loyalty",
    "notifications",
    "billing",
    "webhooks",
    "check",
    "keys",
)


def test_every_exported_name_is_named_in_the_docs() -> None:
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    missing = [n for n in tallybook.__all__ if not re.search(rf"\b{re.escape(n)}\b", docs)]
    assert missing == []


def test_every_exported_class_and_function_has_a_docstring() -> None:
    bare = [
        name
        for name in tallybook.__all__
        if (inspect.isclass(obj := getattr(tallybook, name)) or inspect.isfunction(obj))
        and not (obj.__doc__ or "").strip()
    ]
    assert bare == []


def test_help_of_ledger_names_every_capability() -> None:
    """help(Ledger) listed only __enter__, close and open: the capabilities set
    in __init__ and the cached properties showed no word of what they do."""
    import pydoc

    text = pydoc.render_doc(tallybook.Ledger, renderer=pydoc.plaintext)
    for capability in CAPABILITIES:
        assert f"``{capability}``:" in text
    assert "with Ledger.open(url) as ledger" in text


def test_help_of_every_capability_says_what_each_call_does() -> None:
    """``help(ledger.wallet.debit)``, ``help(ledger.programs.create)`` and 14 other
    calls showed only a signature, and ``help(ledger.wallet)`` no word of the
    class: each now has a docstring."""
    from tallybook.store.memory import MemoryStore

    ledger = tallybook.Ledger(MemoryStore())
    bare = []
    for capability in CAPABILITIES:
        service = getattr(ledger, capability)
        if not (type(service).__doc__ or "").strip():
            bare.append(capability)
        for name in dir(service):
            call = getattr(service, name)
            public = not name.startswith("_") and inspect.ismethod(call)
            if public and not (call.__doc__ or "").strip():
                bare.append(f"{capability}.{name}")
    assert bare == []


def test_a_transaction_type_is_the_same_plain_string_applied_or_replayed() -> None:
    """A wallet credit answered ``type=<TxnType.CREDIT: 'credit'>`` when applied
    and ``type='credit'`` when replayed or read back."""
    from tallybook.store.memory import MemoryStore

    ledger = tallybook.Ledger(MemoryStore())
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    for _ in range(2):
        answers = [
            ledger.wallet.credit("shop", "alice", "cash", 100, txn_id="c1"),
            ledger.wallet.debit("shop", "alice", 10, txn_id="d1"),
            ledger.wallet.authorize("shop", "alice", 10, hold_id="h1").transaction,
            ledger.wallet.transaction("shop", "d1"),
        ]
        assert [type(a.type) for a in answers] == [str] * 4
        assert [a.type for a in answers] == ["credit", "debit", "authorize", "debit"]


def test_a_ledger_over_something_that_is_not_a_store_is_a_config_error(tmp_path: Path) -> None:
    """``Ledger("sqlite:///x.db")`` (the URL ``Ledger.open`` takes) was accepted,
    then the first call raised ``AttributeError: 'str' object has no attribute
    'transact_write'``."""
    for store in ("sqlite:///x.db", tmp_path / "x.db", None):
        with pytest.raises(tallybook.ConfigError, match=r"Ledger\.open\(url\)"):
            tallybook.Ledger(store)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_the_guides_python_examples_pass_mypy_strict(tmp_path: Path) -> None:
    """A user's ``mypy --strict`` on the examples of the Python API (README and the
    capability guides): docs/wallet.md indexed ``t.charge["amount"]``, which is
    ``dict | None`` ("not indexable"). Each page's blocks are one script, as
    later blocks use earlier names."""
    import os
    import subprocess
    import sys

    from docblocks import blocks

    pages = ["README.md"] + [
        f"docs/{name}.md"
        for name in ("wallet", "loyalty", "notifications", "billing", "webhooks", "architecture")
    ]
    scripts = []
    for page in pages:
        script = tmp_path / f"{Path(page).stem.lower()}_example.py"
        script.write_text("\n".join(blocks((ROOT / page).read_text(), "python")))
        scripts.append(str(script))
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # not the project's config
    options = ["--strict", "--follow-imports=silent", "--config-file", str(tmp_path / "mypy.ini")]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *options, "--cache-dir", os.devnull, *scripts],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr

"""Services never spell a storage key: the repositories (``store/records``) own
how each aggregate is stored (docs/architecture.md, "Keys and repositories").

Read from the source of every module outside ``store/`` (services, webhooks, the
entry points, reliability, domain): no import of the key layout
(``tallybook.store.keys``), no key or index attribute name as a string
(``"pk"``, ``"gsi1sk"``, ``"gsi2"`` ...), and no key prefix such as ``"ACCT#"``
or ``f"N#H#{us}"`` outside docstrings.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tallybook.store.port import INDEX_ATTRS, INDEXES, KEY_ATTRS

SRC = Path(__file__).resolve().parents[1] / "src" / "tallybook"
#: the one package that may spell keys: the engines and the repositories
STORE = "store"
KEY_NAMES = frozenset({*KEY_ATTRS, *INDEX_ATTRS, *INDEXES})
#: the start of a key or key prefix: capitals (and digits) up to a '#'
KEY_PREFIX = re.compile(r"^[A-Z][A-Z0-9]*#")
KEY_LAYOUT = "tallybook.store.keys"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that stand alone as statements (docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def key_spellings(source: str) -> list[str]:
    """What in ``source`` spells a storage key, one line each (empty: nothing)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = {f"{node.module}.{alias.name}" for alias in node.names}
            if node.module == KEY_LAYOUT or KEY_LAYOUT in names:
                found.append(f"line {node.lineno}: imports the key layout")
        elif isinstance(node, ast.Import):
            if any(alias.name == KEY_LAYOUT for alias in node.names):
                found.append(f"line {node.lineno}: imports the key layout")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and (node.value in KEY_NAMES or KEY_PREFIX.match(node.value))
        ):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def _service_modules() -> list[Path]:
    return sorted(m for m in SRC.rglob("*.py") if m.relative_to(SRC).parts[0] != STORE)


def test_there_are_service_modules_to_check() -> None:
    parts = {m.relative_to(SRC).parts[0] for m in _service_modules()}
    assert {"services", "webhooks", "http", "cli", "admin", "reliability", "ledger.py"} <= parts


@pytest.mark.parametrize("module", _service_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_service_spells_a_key(module: Path) -> None:
    assert key_spellings(module.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        'item = {"pk": pk, "sk": sk}',
        "store.put(item, NotExists('pk'))",
        'rows = store.query_all(partition, index="gsi1")',
        'marker = item.get("gsi2sk")',
        'partition = f"ACCT#{program}#{account}"',
        'low = "N#H#"',
        "from tallybook.store import keys",
        "from tallybook.store.keys import account_head",
        "import tallybook.store.keys",
    ],
)
def test_the_check_finds_each_way_of_spelling_a_key(source: str) -> None:
    assert key_spellings(source) != []


def test_docstrings_and_other_strings_pass() -> None:
    source = '''
def f():
    """Rows live at ``ACCT#{program}#{account}`` / ``N#H#...``."""
    return {"status": "pending", "program": "shop", "note": "see #3"}
'''
    assert key_spellings(source) == []

"""The layer rules of docs/architecture.md, from the import graph.

The contracts live in pyproject.toml (``[tool.importlinter]``). Imports under
``TYPE_CHECKING`` count like any other: a type-only import is still a
dependency, and a cycle through one is still a cycle for a reader.
"""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _graph(package: str = "tallybook") -> grimp.ImportGraph:
    return grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    imported = graph.find_modules_directly_imported_by(child)
                    work.append((child, iter(sorted(imported))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_layer_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


def test_no_service_imports_the_composition_root() -> None:
    """Services get their collaborators from ``Ledger``; none reaches back for it,
    not even to name its type."""
    importers = _graph().find_modules_that_directly_import("tallybook.ledger")
    capabilities = ("tallybook.services", "tallybook.webhooks")
    assert sorted(m for m in importers if m.startswith(capabilities)) == []


def test_type_only_imports_are_in_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph the rules are checked on sees imports under ``TYPE_CHECKING``."""
    package = tmp_path / "typeonly"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "root.py").write_text("")
    (package / "service.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from typeonly import root\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = _graph("typeonly")
    assert graph.find_modules_directly_imported_by("typeonly.service") == {"typeonly.root"}


def test_the_python_examples_of_the_page_run_as_written() -> None:
    """docs/architecture.md's two Python blocks, each in a fresh namespace: a service
    built without a `Ledger`, and the contract suite subclassed for an engine."""
    from typing import Any

    from docblocks import blocks
    from tallybook.services.wallet.service import WalletService
    from tallybook.store.testing import ItemStoreContract

    doc = (ROOT / "docs" / "architecture.md").read_text()
    service, contract = blocks(doc, "python")
    scope: dict[str, Any] = {}
    exec(service, scope)
    assert isinstance(scope["wallet"], WalletService)
    scope = {}
    exec(contract, scope)
    assert issubclass(scope["TestMyEngine"], ItemStoreContract)


def test_the_page_counts_the_contract_suites_cases() -> None:
    """docs/architecture.md said the shipped contract suite has 184 cases per
    engine; it had 194. Its count is each test's product of parametrisations."""
    from tallybook.store.testing import ItemStoreContract

    cases = 0
    for name, test in inspect.getmembers(ItemStoreContract, inspect.isfunction):
        if name.startswith("test"):
            marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
            cases += math.prod(len(m.args[1]) for m in marks)
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert f"and memory: {cases} cases per engine" in doc

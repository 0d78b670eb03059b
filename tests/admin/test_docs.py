"""docs/admin.md lists every page the admin router serves and every module of it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute

from tallybook import admin

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "admin.md").read_text()


def _routes(routes: list[Any]) -> list[tuple[str, set[str]]]:
    """(path, methods) of every route, walking into included routers."""
    found: list[tuple[str, set[str]]] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found += _routes(inner.routes)
        elif isinstance(route, APIRoute):
            found.append((route.path, set(route.methods or ())))
    return found


def test_every_page_is_in_the_what_it_shows_table() -> None:
    table = DOC[DOC.index("## What it shows") : DOC.index("### Amounts")]
    shown = [
        re.sub(r"\{[^}]+\}", "X", path.split("?")[0])
        for path in re.findall(r"`(/admin/[^`]*)`", table)
    ]
    pages = [path for path, methods in _routes(admin.router.routes) if "GET" in methods]
    pages.remove("/login")
    pages = [p for p in pages if p not in ("", "/admin")]  # /admin: a redirect to /admin/
    assert len(pages) >= 8
    for page in pages:
        pattern = "/admin" + re.sub(r"\{[^}]+\}", "[^/]+", page)
        assert any(re.fullmatch(pattern, path) for path in shown), page


def test_every_module_is_in_the_code_listing() -> None:
    listing = DOC[DOC.index("## Code") : DOC.index("## Tests")]
    for module in sorted((ROOT / "src" / "tallybook" / "admin").glob("*.py")):
        assert re.search(rf"^  {re.escape(module.name)} ", listing, re.M), module.name

"""docs/admin.md lists every page the admin router serves and every module of it."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi.routing import APIRoute

from docblocks import DocShell, blocks
from servers import free_port
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


def test_the_signing_in_commands_run_and_their_key_signs_in(tmp_path: Path) -> None:
    """The "Signing in" block in a fresh folder: the two commands as written, then its
    `serve` line on a free port of 127.0.0.1 (the page's default is 8080), where the key
    it printed signs in to /admin and sees its program."""
    lines = blocks(DOC, "bash")[0].replace("\\\n", " ").splitlines()
    setup, serve = [line for line in lines if line.startswith("tallybook")][:2], lines[-1]
    shell = DocShell(tmp_path)
    result = shell.run("\n".join(setup), timeout=60)
    secret = result.stdout.strip().splitlines()[-1]
    assert secret.startswith("tb_")
    port = free_port()
    command = [*shlex.split(serve, comments=True), "--port", str(port)]
    assert command[:2] == ["tallybook", "serve"]
    server = subprocess.Popen(
        command, cwd=tmp_path, env=shell.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=5) as client:
            for _ in range(200):
                try:
                    page = client.get("/admin/login")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            assert page.status_code == 200
            csrf = re.search(r'name="csrf" value="([^"]*)"', page.text)
            assert csrf is not None
            signed_in = client.post(
                "/admin/login", data={"api_key": secret, "csrf": csrf[1]}, follow_redirects=True
            )
            assert signed_in.status_code == 200
            assert str(signed_in.url) == f"{base}/admin/"
            assert "shop" in signed_in.text
    finally:
        server.terminate()
        server.wait(timeout=30)

"""Fixtures for the admin page: a seeded ledger and a TestClient that can sign in.

``admin`` gives an ``AdminClient``: ``login(secret)`` signs in through the form
(CSRF token from the page, like a browser), ``csrf(path)`` reads the token of a
signed-in page, ``post(path, data)`` posts a form with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .seeding import Seeded, seed

_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(html: str) -> str:
    match = _CSRF.search(html)
    assert match, "no CSRF field on the page"
    return match.group(1)


class AdminClient:
    def __init__(self, client: TestClient) -> None:
        self.client = client

    def login(self, secret: str) -> httpx.Response:
        token = csrf_of(self.client.get("/admin/login").text)
        return self.client.post(
            "/admin/login", data={"api_key": secret, "csrf": token}, follow_redirects=False
        )

    def csrf(self, path: str = "/admin/") -> str:
        return csrf_of(self.client.get(path).text)

    def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        body = {"csrf": self.csrf(), **(data or {})}
        return self.client.post(path, data=body, follow_redirects=False)


@pytest.fixture
def seeded(ledger: Ledger, clock: ManualClock, engine: str, tmp_path: Path) -> Seeded:
    return seed(ledger, clock, tmp_path / "reports", rich=engine == "sqlite")


@pytest.fixture
def admin(ledger: Ledger, seeded: Seeded) -> Iterator[AdminClient]:
    with TestClient(create_app(ledger)) as client:
        yield AdminClient(client)

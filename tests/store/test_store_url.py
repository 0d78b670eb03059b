"""Store URLs: the accepted forms parse; anything else is a ConfigError naming them."""

from __future__ import annotations

import pytest

from tallybook.errors import ConfigError
from tallybook.store.memory import MemoryStore
from tallybook.store.port import Key
from tallybook.store.url import (
    DEFAULT_STORE_URL,
    StoreUrl,
    open_store,
    parse_store_url,
    resolve_store_url,
)


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("sqlite:///tallybook.db", StoreUrl("sqlite", path="tallybook.db")),
        ("sqlite:///./data/x.db", StoreUrl("sqlite", path="./data/x.db")),
        ("sqlite:////abs/x.db", StoreUrl("sqlite", path="/abs/x.db")),
        (
            "dynamodb://ledger?region=eu-west-1",
            StoreUrl("dynamodb", table="ledger", region="eu-west-1"),
        ),
        (
            "dynamodb://ledger?region=us-east-1&endpoint=http://127.0.0.1:8000",
            StoreUrl(
                "dynamodb", table="ledger", region="us-east-1", endpoint="http://127.0.0.1:8000"
            ),
        ),
        ("memory://", StoreUrl("memory")),
        ("memory://scratch", StoreUrl("memory", table="scratch")),
    ],
)
def test_accepted_forms(url: str, parsed: StoreUrl) -> None:
    assert parse_store_url(url) == parsed


@pytest.mark.parametrize(
    "url",
    [
        "mysql://db",
        "tallybook.db",
        "sqlite://relative.db",
        "sqlite:///",
        "dynamodb://",
        "dynamodb:///path",
        "dynamodb://ledger?regoin=eu-west-1",
        "http://[::1",
        "memory://x/path",
        "memory://x?persist=1",
    ],
)
def test_a_bad_url_names_the_accepted_forms(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url(url)
    assert "sqlite:///PATH.db" in caught.value.message
    assert "dynamodb://TABLE?region=" in caught.value.message
    assert "memory://NAME (tests and experiments only" in caught.value.message
    assert caught.value.exit_code == 2


def test_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TALLYBOOK_STORE", raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL == "sqlite:///./tallybook.db"
    monkeypatch.setenv("TALLYBOOK_STORE", "dynamodb://t?region=eu-west-1")
    assert resolve_store_url(None) == "dynamodb://t?region=eu-west-1"
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"


def test_a_memory_url_opens_the_same_store_within_the_process() -> None:
    first = open_store("memory://url-test")
    assert isinstance(first, MemoryStore)
    first.put({"pk": "p", "sk": "s", "n": 1})
    again = open_store("memory://url-test")
    assert again is first
    assert again.get(Key("p", "s")) == {"pk": "p", "sk": "s", "n": 1}
    assert open_store("memory://other").get(Key("p", "s")) is None
    assert first.describe() == "memory://url-test"
    assert "lost when it exits" in first.durability()

"""Store URLs: the accepted forms parse; anything else is a ConfigError naming them."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("sqlite:///x.db?synchronous=normal&synchronous=full", "synchronous"),
        ("sqlite:///x.db?synchronous=full&synchronous=full", "synchronous"),
        ("dynamodb://tbl?region=eu-west-1&region=us-east-1", "region"),
        ("dynamodb://tbl?region=eu-west-1&endpoint=http://a:1&endpoint=http://b:2", "endpoint"),
    ],
)
def test_an_option_given_twice_is_refused(url: str, name: str) -> None:
    # was: the first value, quietly (?synchronous=normal&synchronous=full ran with normal)
    with pytest.raises(ConfigError) as caught:
        parse_store_url(url)
    assert caught.value.message == f"bad store URL {url!r}: {name} given more than once"
    assert caught.value.exit_code == 2


def test_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TALLYBOOK_STORE", raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL == "sqlite:///./tallybook.db"
    monkeypatch.setenv("TALLYBOOK_STORE", "dynamodb://tbl?region=eu-west-1")
    assert resolve_store_url(None) == "dynamodb://tbl?region=eu-west-1"
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"


@pytest.mark.parametrize("url", ["", "  "])
def test_an_empty_url_is_refused_not_read_as_the_default(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: the default ./tallybook.db (an unset variable in Ledger.open(os.environ.get(..., "")))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="it is empty"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []


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


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # botocore raised ValueError for these when the client was made: the
        # CLI printed "unexpected ValueError" and exited 1
        ("dynamodb://ledger?region=us-east-1&endpoint=127.0.0.1:8000", "http://"),
        ("dynamodb://ledger?endpoint=http://127.0.0.1:port", "not a URL"),
        ("dynamodb://ledger?endpoint=ftp://127.0.0.1:8000", "http://"),
        ("dynamodb://ledger?region=us east", "not a region name"),
        # an empty value was read as absent: endpoint= went to AWS
        ("dynamodb://ledger?region=us-east-1&endpoint=", "endpoint is empty"),
        ("dynamodb://ledger?region=&endpoint=http://127.0.0.1:8000", "region is empty"),
        # a repeated option took the first value silently
        ("dynamodb://ledger?region=us-east-1&region=eu-west-1", "region given more than once"),
        # DynamoDB refused these table names only at the first request, after open
        ("dynamodb://ab?region=us-east-1", "table name 'ab'"),
        ("dynamodb://led:ger?region=us-east-1", "table name 'led:ger'"),
        ("dynamodb://" + "t" * 256 + "?region=us-east-1", "is not 3-255 characters"),
    ],
)
def test_a_malformed_dynamodb_option_is_a_config_error(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        parse_store_url(url)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("url", [5, b"sqlite:///x.db"])
def test_a_url_that_is_not_a_string_is_a_config_error(url: object) -> None:
    """Ledger.open(5) raised AttributeError ('int' object has no attribute 'decode')."""
    from tallybook.ledger import Ledger

    with pytest.raises(ConfigError, match="not a string"):
        Ledger.open(url)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("region", "endpoint"), [("us-east-1", "127.0.0.1:8000"), ("us east", None)]
)
def test_a_store_made_with_a_malformed_endpoint_or_region_is_a_config_error(
    region: str, endpoint: str | None
) -> None:
    from tallybook.store.dynamodb import DynamoStore

    with pytest.raises(ConfigError, match="cannot use DynamoDB region"):
        DynamoStore("ledger", region=region, endpoint=endpoint)


def test_the_cli_prints_one_line_for_a_malformed_endpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from tallybook.cli import main

    url = "dynamodb://ledger?region=us-east-1&endpoint=127.0.0.1:8000"
    monkeypatch.setattr(sys, "argv", ["tallybook", "account", "show", "alice", "-p", "shop"])
    monkeypatch.setenv("TALLYBOOK_STORE", url)
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "unexpected" not in err
    assert "endpoint '127.0.0.1:8000' is not a URL" in err
    assert len(err.strip().splitlines()) == 1

"""SQLite across ``fork()``: a child of a process with the store open must not use it.

SQLite's locks do not carry over a fork, yet the child's copy of SQLite believes it
holds the parent's: its writes went unlocked, and a parent that then closed its store
deleted the WAL under them (a child's 522 acknowledged credits left 110). The child
is now refused, with the store inherited and with a new one on the same file; a
child of a process that closed its store first, or one on another file, works."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tallybook.errors import ConfigError, StoreClosed
from tallybook.ledger import Ledger


def _in_a_forked_child(work: Callable[[], str]) -> str:
    """What ``work`` returns (or the error it raises, as ``Class: message``) in a child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanup
        os.close(read)
        try:
            answer = work()
        except Exception as exc:
            answer = f"{type(exc).__name__}: {exc}"
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return str(answer)


def _credit(ledger: Ledger, txn: str) -> str:
    ledger.wallet.credit("shop", "alice", "cash", 1, txn_id=txn)
    return "credited"


def test_a_forked_child_is_refused_the_store_its_parent_has_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    ledger = Ledger.open(url)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    _credit(ledger, "parent-1")

    inherited = _in_a_forked_child(lambda: _credit(ledger, "child-1"))
    reopened = _in_a_forked_child(lambda: _credit(Ledger.open(url), "child-2"))
    elsewhere = _in_a_forked_child(
        lambda: Ledger.open(f"sqlite:///{tmp_path / 'other.db'}").programs.create("x").id
    )

    for answer in (inherited, reopened):
        assert answer.startswith(f"{ConfigError.__name__}: SQLite store "), answer
        assert "was open when this process was forked" in answer
        assert "'spawn'" in answer
    assert elsewhere == "x"
    _credit(ledger, "parent-2")
    ledger.close()
    with Ledger.open(url) as again:
        assert again.accounts.get("shop", "alice").fund("cash").balance == 2


def test_a_child_of_a_process_that_closed_its_store_uses_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    with Ledger.open(url) as ledger:
        ledger.programs.create("shop")
        ledger.accounts.open("shop", "alice")

    def credit_and_close() -> str:
        with Ledger.open(url) as child:
            return _credit(child, "child-1")

    assert _in_a_forked_child(credit_and_close) == "credited"
    with Ledger.open(url) as ledger:
        assert ledger.accounts.get("shop", "alice").fund("cash").balance == 1


def test_a_store_used_again_after_its_close_is_refused_in_parent_and_child(
    tmp_path: Path,
) -> None:
    """A closed store opened a connection again when used (and was then not
    counted as open, so a child forked then used it unrefused); a closed store
    now refuses every call, in the parent and in a child."""
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'shop.db'}")
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    ledger.close()
    with pytest.raises(StoreClosed):
        _credit(ledger, "parent-1")

    answer = _in_a_forked_child(lambda: _credit(ledger, "child-1"))
    assert answer.startswith(f"{StoreClosed.__name__}: "), answer

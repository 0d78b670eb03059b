"""Running the documentation's examples as a reader runs them.

:func:`blocks` takes a page's fenced code blocks in page order. :class:`DocShell`
runs them as a reader pastes them into a fresh terminal in an empty folder: a shell
block under ``set -e``, with the project's console scripts first on ``PATH`` and none
of the variables that choose a store, program, reports folder or webhook key (the
page's defaults apply: ``./tallybook.db`` in the folder), unless the test names the
engine's store. A block that exits non-zero fails the test with the block, its
stdout and its stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tallybook.store.port import ItemStore
from tallybook.store.sqlite import SqliteStore

#: set in a test run (tests/conftest.py sets the webhook key for DynamoDB), not in
#: a reader's fresh shell
READER_UNSET = (
    "TALLYBOOK_STORE",
    "TALLYBOOK_PROGRAM",
    "TALLYBOOK_REPORTS_OUT",
    "TALLYBOOK_WEBHOOK_KEY",
)


def blocks(text: str, lang: str, *, after: str | None = None) -> list[str]:
    """The ```` ```lang ```` blocks of a page, in page order; with ``after``, those
    from that text (a heading) on."""
    if after is not None:
        text = text[text.index(after) :]
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


class DocShell:
    """A reader's shell in ``folder``, on ``store`` when given: a SQLite store that is
    the folder's ``tallybook.db`` is the pages' default and stays unnamed; any other
    (a DynamoDB table) is named by ``$TALLYBOOK_STORE``. ``env``: variables the test
    adds (a page says to set them). ``env`` and ``folder`` also serve a command the
    test starts itself (a server, a worker that runs until stopped)."""

    def __init__(self, folder: Path, store: ItemStore | None = None, **env: str) -> None:
        self.folder = folder
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        self.env = {**os.environ, "PATH": path}
        for name in READER_UNSET:
            self.env.pop(name, None)
        default = isinstance(store, SqliteStore) and Path(store.path) == folder / "tallybook.db"
        if store is not None and not default:
            self.env["TALLYBOOK_STORE"] = store.describe()
        self.env.update(env)

    def run(self, script: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Runs a shell block under ``set -e``; the test fails if it exits non-zero."""
        __tracebackhide__ = True
        return self._run(["bash", "-c", "set -e\n" + script], script, timeout)

    def python(self, code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Runs a Python block as a script; the test fails if it exits non-zero."""
        __tracebackhide__ = True
        return self._run([sys.executable, "-c", code], code, timeout)

    def _run(self, argv: list[str], block: str, timeout: float) -> subprocess.CompletedProcess[str]:
        __tracebackhide__ = True  # the failure names the block: the test's line is enough
        result = subprocess.run(
            argv,
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            pytest.fail(
                f"a documented block exited {result.returncode} in {self.folder}\n"
                f"--- the block:\n{_indented(block)}\n"
                f"--- its stdout:\n{_indented(result.stdout)}\n"
                f"--- its stderr:\n{_indented(result.stderr)}"
            )
        return result


def _indented(text: str) -> str:
    return textwrap.indent(text.rstrip("\n"), "    ") if text.strip() else "    (nothing)"

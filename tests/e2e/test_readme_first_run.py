"""A first run of the README as a new user does it: the CLI walkthrough, then the HTTP
walkthrough in the same folder, each under ``set -e``."""

from __future__ import annotations

from pathlib import Path

from docblocks import DocShell, blocks
from servers import free_port

README = Path(__file__).resolve().parents[2] / "README.md"


def _block(fence: str, after: str, must_contain: str) -> str:
    return next(b for b in blocks(README.read_text(), fence, after=after) if must_contain in b)


def test_http_walkthrough_runs_after_the_cli_walkthrough(tmp_path: Path) -> None:
    cli = _block("bash", "## CLI", "tallybook program create")
    http = _block("sh", "## HTTP API", "curl").replace("8080", str(free_port()))
    shell = DocShell(tmp_path)
    shell.run(cli, timeout=180)
    result = shell.run(http, timeout=180)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert '"account":"alice"' in lines[0]  # open already (the CLI walkthrough): 200
    assert '"amount":250' in lines[1]
    assert '"fund":"points","unit":"points","balance":250' in lines[2]
    assert '"fund":"cash","unit":"USD","balance":300' in lines[2]  # the CLI's postings

"""The curl walkthroughs of README.md and docs/http.md run as written against a
real server, and again in the same folder (every write replays)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docblocks import DocShell, blocks
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "docs/http.md"])
def test_curl_example_runs_twice(doc: str, tmp_path: Path) -> None:
    script = next(
        b for b in blocks((ROOT / doc).read_text(), "sh") if "curl" in b and "tallybook serve" in b
    )
    if "kill %1" not in script:  # docs/http.md says it after the block
        script += "kill %1\n"
    shell = DocShell(tmp_path)
    for _ in range(2):
        result = shell.run(script.replace("8080", str(free_port())))
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        assert '"account":"alice"' in lines[0]
        assert '"amount":250' in lines[1]
        balance = '"fund":"points","unit":"points","balance":250,"held":0,"available":250'
        assert balance in lines[2]

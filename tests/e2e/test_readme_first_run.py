"""A first run of the README as a new user does it: the CLI walkthrough, then the HTTP
walkthrough in the same folder, each under ``set -e``."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _block(fence: str, after: str, must_contain: str) -> str:
    text = README.read_text()
    section = text[text.index(after) :]
    return next(b for b in re.findall(rf"```{fence}\n(.*?)```", section, re.S) if must_contain in b)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_walkthrough_runs_after_the_cli_walkthrough(tmp_path: Path) -> None:
    cli = _block("bash", "## CLI", "tallybook program create")
    http = _block("sh", "## HTTP API", "curl").replace("8080", str(_free_port()))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TALLYBOOK_STORE", None)
    env.pop("TALLYBOOK_PROGRAM", None)
    for script in (cli, http):
        result = subprocess.run(
            ["bash", "-c", "set -e\n" + script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert '"account":"alice"' in lines[0]  # open already (the CLI walkthrough): 200
    assert '"amount":250' in lines[1]
    assert '"fund":"points","unit":"points","balance":250' in lines[2]
    assert '"fund":"cash","unit":"USD","balance":300' in lines[2]  # the CLI's postings

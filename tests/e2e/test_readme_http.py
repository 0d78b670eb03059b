"""The curl walkthroughs of README.md and docs/http.md run as written against a
real server, and again in the same folder (every write replays)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("doc", ["README.md", "docs/http.md"])
def test_curl_example_runs_twice(doc: str, tmp_path: Path) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / doc).read_text(), flags=re.S)
    script = next(b for b in blocks if "curl" in b and "tallybook serve" in b)
    if "kill %1" not in script:  # docs/http.md says it after the block
        script += "kill %1\n"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TALLYBOOK_STORE", None)
    for _ in range(2):
        run = script.replace("8080", str(free_port()))
        result = subprocess.run(
            ["bash", "-c", "set -e\n" + run],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        assert '"account":"alice"' in lines[0]
        assert '"amount":250' in lines[1]
        balance = '"fund":"points","unit":"points","balance":250,"held":0,"available":250'
        assert balance in lines[2]

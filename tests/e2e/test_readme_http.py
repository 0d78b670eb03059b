"""The README's curl walkthrough runs as written against a real server."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readme_curl_example(tmp_path: Path) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    script = next(b for b in blocks if "curl" in b and "tallybook serve" in b)
    script = script.replace("8080", str(free_port()))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TALLYBOOK_STORE", None)
    result = subprocess.run(
        ["bash", "-c", "set -e\n" + script],
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
    assert '"fund":"points","unit":"points","balance":250,"held":0,"available":250' in lines[2]

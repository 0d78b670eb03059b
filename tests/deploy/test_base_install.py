"""``pip install tallybook`` (no extras) gives a working library without FastAPI, and
``tallybook[server]`` an HTTP app without the CLI.

The wheel is built from a copy of the source and installed with ``pip install
--no-deps`` into a fresh virtualenv; its one dependency, boto3, and boto3's own
dependencies are lent from the test environment (linked in through a ``.pth``
file, nothing else), so the test needs no network for them (building the wheel
fetches the build backend, setuptools, as any pip build does). In that virtualenv
the library works on SQLite (and DynamoDB Local when configured), the scheduled
Lambda handler runs, and the ``tallybook`` command says which extra to install.
A second virtualenv gets the ``server`` extra's closure the same way and answers
an API Gateway request through the Lambda handler.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tallybook

from .test_lambda_events import http_api_event

ROOT = Path(__file__).resolve().parents[2]
DYNAMODB = os.environ.get("TALLYBOOK_TEST_DYNAMODB", "")
SERVER_AND_CLI = ("fastapi", "uvicorn", "pydantic", "mangum", "jinja2", "typer", "rich")


def _closure(req: Requirement, seen: set[str], extra: str = "") -> set[str]:
    """The distribution ``req`` names and every one it requires on this interpreter
    (markers evaluated, extras of dependencies left out); ``seen`` collects them."""
    key = canonicalize_name(req.name)
    if (req.marker and not req.marker.evaluate({"extra": extra})) or key in seen:
        return seen
    seen.add(key)
    for sub in importlib.metadata.requires(req.name) or []:
        _closure(Requirement(sub), seen)
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


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tallybook's wheel, built from a copy of the source (the tree is left alone)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--wheel-dir", str(tmp / "wheels"), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [built] = (tmp / "wheels").glob("tallybook-*.whl")
    return built


def _requires(wheel: Path, extra: str | None) -> list[Requirement]:
    """The wheel's requirements for ``extra`` (None: the base dependencies)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(f"tallybook-{tallybook.__version__}.dist-info/METADATA").decode()
    requires = [Requirement(r) for r in re.findall(r"^Requires-Dist: (.+)$", meta, re.M)]
    if extra is None:
        return [r for r in requires if "extra" not in str(r.marker or "")]
    return [r for r in requires if f'extra == "{extra}"' in str(r.marker or "")]


def _fresh_venv(tmp: Path, wheel: Path, extras: tuple[str, ...]) -> Path:
    """A new virtualenv with the wheel (--no-deps) and the closure of its base
    dependencies and ``extras`` lent from this environment."""
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [*PIP, "--python", str(python), "install", "--no-deps", str(wheel)],
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
    dists: set[str] = set()
    for req in _requires(wheel, None):
        _closure(req, dists)
    for extra in extras:
        for req in _requires(wheel, extra):
            _closure(req, dists, extra)
    _lend(dists, tmp / "lent")
    (Path(purelib) / "lent_deps.pth").write_text(f"{tmp / 'lent'}\n")
    return env_dir


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return _fresh_venv(tmp_path_factory.mktemp("base-install"), wheel, ())


@pytest.fixture(scope="module")
def server_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return _fresh_venv(tmp_path_factory.mktemp("server-install"), wheel, ("server",))


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("TALLYBOOK_STORE", None)
    env.setdefault("AWS_ACCESS_KEY_ID", "local")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def test_the_wheel_requires_boto3_only_and_puts_the_rest_in_extras(wheel: Path) -> None:
    assert [str(r) for r in _requires(wheel, None)] == ["boto3>=1.34"]
    server = {r.name for r in _requires(wheel, "server")}
    assert {"fastapi", "uvicorn", "mangum", "jinja2"} <= server
    assert {r.name for r in _requires(wheel, "cli")} == {"typer", "rich", "cryptography"}
    assert {"cryptography"} <= server
    assert {r.name for r in _requires(wheel, "webhooks")} == {"cryptography"}
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(f"tallybook-{tallybook.__version__}.dist-info/METADATA").decode()
    assert f"Version: {tallybook.__version__}" in meta
    assert "License-Expression: Apache-2.0" in meta


def test_the_installed_cli_extra_is_the_one_a_fresh_install_may_get() -> None:
    """CI installs the cli extra beside the test extra, whose tools may hold typer
    back; ``pip install 'tallybook[cli]'`` alone takes the newest its bounds allow.
    So the versions tested here must satisfy those bounds (typer 0.29, unbounded,
    drew ``--json <bool>`` in every help while CI tested 0.27)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for line in project["optional-dependencies"]["cli"]:
        req = Requirement(line)
        installed = importlib.metadata.version(req.name)
        assert req.specifier.contains(installed), f"{req.name} {installed} is not {req}"
    (typer,) = (
        r for r in map(Requirement, project["optional-dependencies"]["cli"]) if r.name == "typer"
    )
    assert typer.specifier.contains("0.27.3")
    assert not typer.specifier.contains("0.29.2")  # its help draws --json <bool>
    assert not typer.specifier.contains("0.26.8")  # its errors name 'KIND:{credit|...}'


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


LIBRARY_HTTP_EVENT = """
import json
from tallybook.errors import ConfigError
from tallybook.lambda_handler import handler
try:
    handler(json.loads({event!r}), None)
except ConfigError as exc:
    print(exc.message)
"""


def test_the_api_handler_names_the_server_extra_to_install(base_venv: Path, tmp_path: Path) -> None:
    """An API Gateway event on a library-only install: the handler says what to
    install (it raised `ModuleNotFoundError: No module named 'mangum'`)."""
    event = json.dumps(http_api_event("GET", "/healthz", {}))
    code = LIBRARY_HTTP_EVENT.format(event=event)
    result = _run(base_venv, str(base_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("this needs tallybook's server extra (fastapi, ")
    assert result.stdout.strip().endswith("not installed): pip install 'tallybook[server]'")


SERVER_RUN = """
import importlib.util, json, os
for name in ("typer", "rich", "httpx", "pytest"):
    assert importlib.util.find_spec(name) is None, name
os.environ["TALLYBOOK_STORE"] = "sqlite:///server.db"
from tallybook import Ledger
from tallybook.lambda_handler import handler
Ledger.open().programs.create("shop")
event = json.loads({event!r})
response = handler(event, None)
assert response["statusCode"] == 200, response
print(json.loads(response["body"])["status"])
"""


def test_the_server_extra_serves_http_without_the_cli(server_venv: Path, tmp_path: Path) -> None:
    event = json.dumps(http_api_event("GET", "/healthz", {}))
    code = SERVER_RUN.format(event=event)
    result = _run(server_venv, str(server_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.fixture(scope="module")
def cli_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return _fresh_venv(tmp_path_factory.mktemp("cli-install"), wheel, ("cli",))


def test_the_cli_extra_works_and_serve_names_the_server_extra(
    cli_venv: Path, tmp_path: Path
) -> None:
    command = str(cli_venv / "bin" / "tallybook")
    created = _run(cli_venv, command, "program", "create", "shop", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    served = _run(cli_venv, command, "serve", "--port", "0", cwd=tmp_path)
    assert served.returncode == 1
    assert "pip install 'tallybook[server]'" in served.stderr
    assert "Traceback" not in served.stderr


def test_torture_names_the_server_extra_its_http_clients_need(
    cli_venv: Path, tmp_path: Path
) -> None:
    """`tallybook torture` (2 HTTP client threads by default) on the cli extra alone
    ended "error: unexpected ModuleNotFoundError: No module named 'uvicorn'"."""
    command = str(cli_venv / "bin" / "tallybook")
    store = f"sqlite:///{tmp_path / 't.db'}"
    ran = _run(cli_venv, command, "torture", "--ops", "5", "--store", store, cwd=tmp_path)
    assert ran.returncode == 1
    assert "pip install 'tallybook[server]'" in ran.stderr
    assert "--http-threads 0" in ran.stderr
    assert "ModuleNotFoundError" not in ran.stderr
    python_only = _run(
        cli_venv,
        command,
        "torture",
        "--ops",
        "5",
        "--http-threads",
        "0",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert python_only.returncode == 0, python_only.stderr

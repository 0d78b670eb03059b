"""docs/deploy.md says what deploy/template.yaml, the jobs and pyproject hold."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from docblocks import blocks
from tallybook.jobs import JOBS

from .test_template import TEMPLATE, _CfnLoader

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "deploy.md").read_text()


def _table_rows(first_header: str) -> list[list[str]]:
    """The rows of the markdown table whose header starts with ``| first_header |``."""
    lines = [line.strip() for line in DOC.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


def _template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)


def test_parameters_table_matches_the_template() -> None:
    params = _template()["Parameters"]
    rows = {r[0]: r[1] for r in _table_rows("parameter")}
    assert set(rows) == set(params)
    for name, default in rows.items():
        assert default == (params[name]["Default"] or "(empty)"), name


def test_jobs_table_matches_the_functions_and_their_schedules() -> None:
    template = _template()
    rows = _table_rows("function")
    assert {r[1] for r in rows} == set(JOBS)
    for function, job, parameter, default in rows:
        props = template["Resources"][function]["Properties"]
        assert props["Environment"]["Variables"]["TALLYBOOK_JOB"] == job
        [event] = props["Events"].values()
        assert event["Properties"]["Schedule"] == {"Ref": parameter}
        assert template["Parameters"][parameter]["Default"] == default


def test_install_table_names_the_extras_pyproject_defines() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = set(re.findall(r"tallybook\[([a-z,]+)\]", DOC))
    extras = {e for group in named for e in group.split(",")}
    assert extras <= set(project["optional-dependencies"])
    assert {"server", "cli"} <= extras
    assert [d.split(">")[0] for d in project["dependencies"]] == ["boto3"]


def test_shell_examples_set_every_variable_they_use() -> None:
    """A reader pasting the blocks in order has each `$VAR` set (`$API_URL` was not),
    and the API URL is taken from the stack's `ApiUrl` without its trailing slash."""
    assigned: set[str] = set()
    unset = []
    for block in blocks(DOC, "bash"):
        for line in block.splitlines():
            code = line.split("#", 1)[0]
            used = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", code)
            unset += [name for name in used if name not in assigned]
            assigned |= set(re.findall(r"(?:^|export |\s)([A-Za-z_][A-Za-z0-9_]*)=", code))
    assert unset == []
    api_url = _template()["Outputs"]["ApiUrl"]["Value"]["Fn::Sub"]
    if api_url.endswith("/"):
        assert "${API_URL%/}" in DOC
    assert "OutputKey=='ApiUrl'" in DOC


def test_the_build_command_targets_the_functions_runtime_and_architecture() -> None:
    """The package is built for the template's runtime and architecture, without .pyc
    files compiled for the builder's own Python (20 MB the 3.12 runtime never used)."""
    build = DOC[DOC.index("### Build") : DOC.index("### Deploy")]
    command = " ".join(re.findall(r"^pip install --target .*?\]\"$", build, flags=re.S | re.M))
    command = " ".join(command.replace("\\\n", " ").split())
    function = _template()["Globals"]["Function"]
    assert f"--python-version {function['Runtime'].removeprefix('python')}" in command
    [arch] = function["Architectures"]
    assert f"--platform manylinux2014_{arch}" in command
    assert f"--target deploy/{function['CodeUri'].rstrip('/')}" in command  # beside the template
    assert "--only-binary=:all:" in command
    assert "--no-compile" in command

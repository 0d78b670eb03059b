"""deploy/template.yaml: valid (cfn-lint), the same table as the CLI, least privilege, one
scheduled function per job."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tallybook.jobs import JOBS
from tallybook.store.dynamodb.table import cloudformation_template

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Ref X -> {"Ref": "X"}, !GetAtt A.B, ...)."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::Serverless::Function"
    }


def test_cfn_lint_passes() -> None:
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    command = [str(cfn_lint)] if cfn_lint.exists() else [shutil.which("cfn-lint") or "cfn-lint"]
    result = subprocess.run([*command, str(TEMPLATE)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_table_is_the_one_table_create_makes(template: dict[str, Any]) -> None:
    expected = cloudformation_template("NAME")["Resources"]["TallybookTable"]
    expected["Properties"]["TableName"] = {"Ref": "TableName"}
    actual = template["Resources"]["Table"]
    assert actual == expected, (
        "deploy/template.yaml's Table differs from tallybook's table definition "
        "(src/tallybook/store/dynamodb/table.py); write this resource there, as YAML:\n"
        + yaml.safe_dump({"Table": expected}, sort_keys=False)
    )


def test_functions_get_the_table_and_its_indexes_only_and_never_scan(
    template: dict[str, Any],
) -> None:
    text = TEMPLATE.read_text()
    assert not re.search(r"dynamodb:(Scan|\*)|dynamodb:[A-Za-z]*Table\b", text)
    resources = template["Resources"]
    table_policy = resources["TableAccessPolicy"]["Properties"]["PolicyDocument"]
    [statement] = table_policy["Statement"]
    assert statement["Resource"] == [
        {"Fn::GetAtt": ["Table", "Arn"]},
        {"Fn::Sub": "${Table.Arn}/index/*"},
    ]
    assert all(a.startswith("dynamodb:") for a in statement["Action"])
    for name, fn in _functions(template).items():
        policies = fn["Properties"]["Policies"]
        assert {"Ref": "TableAccessPolicy"} in policies, name
        assert all(set(p) == {"Ref"} for p in policies), f"{name}: only the stack's own policies"


def test_one_scheduled_function_per_job_with_a_schedule_parameter(
    template: dict[str, Any],
) -> None:
    scheduled = {
        fn["Properties"]["Environment"]["Variables"]["TALLYBOOK_JOB"]: fn["Properties"]
        for fn in _functions(template).values()
        if fn["Properties"]["Handler"] == "tallybook.lambda_handler.scheduled"
    }
    assert set(scheduled) == set(JOBS)
    for job, props in scheduled.items():
        [event] = props["Events"].values()
        assert event["Type"] == "Schedule"
        parameter = event["Properties"]["Schedule"]["Ref"]
        assert parameter in template["Parameters"], job
        assert re.fullmatch(r"(rate|cron)\(.+\)", template["Parameters"][parameter]["Default"])
    api = _functions(template)["ApiFunction"]["Properties"]
    assert api["Handler"] == "tallybook.lambda_handler.handler"
    assert {e["Properties"]["Path"] for e in api["Events"].values()} == {"/", "/{proxy+}"}


def test_parameters_and_outputs(template: dict[str, Any]) -> None:
    assert {"TableName", "Stage", "Program", "ReportInterval"} <= set(template["Parameters"])
    assert "HttpApi" in template["Outputs"]["ApiUrl"]["Value"]["Fn::Sub"]
    store = template["Globals"]["Function"]["Environment"]["Variables"]["TALLYBOOK_STORE"]
    assert store == {"Fn::Sub": "dynamodb://${Table}?region=${AWS::Region}"}


def test_the_webhook_key_is_a_kept_secret_only_its_users_read(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    key = resources["WebhookKey"]
    assert key["Type"] == "AWS::SecretsManager::Secret"
    assert key["DeletionPolicy"] == key["UpdateReplacePolicy"] == "Retain"
    generated = key["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    assert generated["ExcludePunctuation"] is True
    chosen = {"Fn::If": ["MakeWebhookKey", {"Ref": "WebhookKey"}, {"Ref": "WebhookKeySecret"}]}
    [statement] = resources["WebhookKeyReadPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Resource"]) == ("secretsmanager:GetSecretValue", chosen)
    readers = {
        name
        for name, fn in _functions(template).items()
        if {"Ref": "WebhookKeyReadPolicy"} in fn["Properties"]["Policies"]
    }
    assert readers == {"ApiFunction", "WebhooksFunction"}
    for name in readers:
        env = _functions(template)[name]["Properties"]["Environment"]["Variables"]
        assert env["TALLYBOOK_WEBHOOK_KEY_SECRET"] == chosen


def test_every_api_instance_signs_admin_sessions_with_the_stack_s_secret(
    template: dict[str, Any],
) -> None:
    """Without a shared secret each Lambda instance draws its own, and a sign-in on
    one is refused by the next (tests/deploy/test_admin_session_secret.py)."""
    resources = template["Resources"]
    secret = resources["AdminSessionSecret"]
    assert secret["Type"] == "AWS::SecretsManager::Secret"
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 32
    policy = resources["AdminSessionSecretReadPolicy"]["Properties"]["PolicyDocument"]
    [statement] = policy["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert statement["Resource"] == {"Ref": "AdminSessionSecret"}
    readers = {
        name
        for name, fn in _functions(template).items()
        if {"Ref": "AdminSessionSecretReadPolicy"} in fn["Properties"]["Policies"]
    }
    assert readers == {"ApiFunction"}
    env = _functions(template)["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["TALLYBOOK_SESSION_SECRET_ARN"] == {"Ref": "AdminSessionSecret"}


def test_report_interval_takes_exactly_the_intervals_the_product_takes(
    template: dict[str, Any],
) -> None:
    """``ReportInterval``'s pattern let a stack deploy with an interval every
    reports run then refused (``32d``, ``745h``, ``99999m``: over 31 days). It
    now takes exactly the lengths ``parse_interval`` takes (written in lower
    case); that each program's bucket divides it is checked when the job runs
    (docs/deploy.md)."""
    from tallybook.domain.billing import parse_interval
    from tallybook.errors import ValidationError

    parameter = template["Parameters"]["ReportInterval"]
    pattern = re.compile(parameter["AllowedPattern"])
    assert pattern.fullmatch(parameter["Default"])
    for n in range(100_001):
        for unit in "mhd":
            for text in (f"{n}{unit}", f"0{n}{unit}"):
                try:
                    parse_interval(text)
                    accepted = True
                except ValidationError:
                    accepted = False
                assert (pattern.fullmatch(text) is not None) == accepted, text
    for text in ("", "15", "m", "15 m", "1w", "15m ", "-15m", "1.5h"):
        assert pattern.fullmatch(text) is None, text

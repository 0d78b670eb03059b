"""The torture workload in short mode (CI), on both engines.

Python-API threads and HTTP clients (and, on SQLite, a worker process) run
random operations with replays while the storage port injects every kind of
fault; then the checker must find no violation of invariants 1-6. A separate
SQLite run kills the ``tallybook serve`` process with SIGKILL mid-run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tallybook.reliability.faults import FaultPlan
from tallybook.reliability.runner import TortureConfig, run
from tallybook.store.port import ItemStore

#: denser faults than the standard plan, so a short run sees every kind
SHORT_FAULTS = FaultPlan(
    error_before=0.04,
    error_after=0.04,
    conflict=0.04,
    throttle=0.01,
    throttle_burst=2,
    slow=0.02,
    slow_seconds=0.002,
)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """Injected faults make the services log warnings by design."""
    logger = logging.getLogger("tallybook")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def _short(engine: str, store: ItemStore, tmp_path: Path, **overrides: object) -> TortureConfig:
    sqlite = engine == "sqlite"
    settings: dict[str, object] = {
        "store_url": store.describe(),
        "program": "torture",
        "ops": 500 if sqlite else 100,
        "threads": 3,
        "http_threads": 2 if sqlite else 1,
        "processes": 1 if sqlite else 0,
        "accounts": 6,
        "replay_rate": 0.15,
        "faults": SHORT_FAULTS,
        "server_log": tmp_path / "server.log",
    }
    settings.update(overrides)
    return TortureConfig(**settings)  # type: ignore[arg-type]


def test_short_torture_has_no_violations(engine: str, store: ItemStore, tmp_path: Path) -> None:
    config = _short(engine, store, tmp_path)
    report = run(config)
    assert report.violations == []
    assert report.total_ops == config.ops
    assert set(report.ops) >= {"earn", "redeem", "transfer", "hold", "capture", "void", "replay"}
    assert report.outcomes["applied"] > config.ops // 2
    assert report.outcomes["replayed"] > 0
    kinds = ("error_before", "error_after", "conflict", "throttle", "slow")
    if engine == "sqlite":  # 500 operations: every kind fires (a few per cent each)
        assert all(report.faults[kind] > 0 for kind in kinds), report.faults
    else:  # 100 operations: most kinds fire; which ones depends on the interleaving
        assert sum(report.faults[kind] > 0 for kind in kinds) >= 3, report.faults
    assert report.final_checks["acked"] > config.ops // 2
    assert report.final_checks["records"] >= report.final_checks["acked"]
    live = report.live_checks
    assert live["conservation"] + live["conservation_inconclusive"] > 0, live
    assert "0 violation(s)" in report.markdown()


@pytest.mark.parametrize("engine", ["sqlite"])
def test_sigkill_of_the_server_mid_run_loses_nothing(store: ItemStore, tmp_path: Path) -> None:
    config = _short(
        "sqlite", store, tmp_path, ops=300, threads=1, http_threads=4, processes=0, kills=1
    )
    report = run(config)
    assert report.violations == []
    assert report.faults["sigkill"] == 1
    retried = sum(n for k, n in report.outcomes.items() if k.startswith("retry:"))
    assert retried > 0  # clients saw the server go away and retried their keys
    assert report.final_checks["acked"] > 200


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_second_run_on_the_same_program_continues_it(store: ItemStore, tmp_path: Path) -> None:
    """docs/reliability.md's Python twin run twice (same store, program and seed): the
    second run's keys were the first run's, so its own requests came back as 409
    idempotency conflicts and it reported violations that were not there."""
    config = _short(
        "sqlite", store, tmp_path, ops=120, processes=0, http_threads=1, faults=FaultPlan()
    )
    first = run(config)
    assert first.violations == []
    second = run(config)
    assert second.violations == []
    assert second.outcomes["applied"] > config.ops // 2


@pytest.mark.parametrize("rate", ["1.5", "-0.1"])
def test_a_replay_rate_outside_0_to_1_is_refused_before_the_run(rate: str) -> None:
    """docs/reliability.md: `--replay-rate` is a share of the operations (1.5 ran)."""
    from typer.testing import CliRunner

    from tallybook.cli import app

    args = ["torture", "--ops", "10", "--replay-rate", rate, "--store", "memory://rate"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "--replay-rate" in result.output

"""Run a torture: setup, clients (threads, processes, HTTP), readers, faults, kills, check.

Clients of one run, all on the same program of the same store:

- ``threads`` Python clients in this process, over a :class:`FaultyStore`;
- ``http_threads`` HTTP clients against a server in this process whose
  ledger is over another :class:`FaultyStore`; or, with ``kills``, against a
  ``tallybook serve`` child process (no injected faults) that is killed with
  SIGKILL ``kills`` times mid-run and started again;
- ``processes`` child processes of ``threads`` Python clients each, with
  their own :class:`FaultyStore`.

After the clients: the wallet reconcile job (``tallybook reconcile``; in this
process on ``memory://``), then :func:`check_program` on the store without faults.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tallybook.errors import TallybookError
from tallybook.ledger import Ledger
from tallybook.reliability.api import Api, HttpApi, PythonApi
from tallybook.reliability.checker import check_program
from tallybook.reliability.faults import FaultPlan, FaultyStore
from tallybook.reliability.readers import Reader
from tallybook.reliability.report import TortureReport
from tallybook.reliability.servers import ProcessServer, ThreadServer
from tallybook.reliability.workload import Client, ClientLog, HoldPool, Workload, setup
from tallybook.store.url import open_store, parse_store_url

Tick = Callable[[int], None]


@dataclass(frozen=True)
class TortureConfig:
    store_url: str
    program: str
    ops: int = 2_000
    threads: int = 4
    http_threads: int = 2
    processes: int = 0
    readers: int = 1
    kills: int = 0
    accounts: int = 12
    replay_rate: float = 0.1
    seed: int = 1
    faults: FaultPlan = field(default_factory=FaultPlan.standard)
    server_log: Path | None = None
    #: stop the clients after this many seconds even if ``ops`` are not done (0: never)
    max_seconds: float = 0.0
    #: part of every key the clients make, so that a run continuing a program an
    #: earlier run made never reuses its keys ("": a new one for each run)
    run_id: str = ""

    @property
    def workload(self) -> Workload:
        return Workload(self.program, accounts=self.accounts, replay_rate=self.replay_rate)

    @property
    def clients(self) -> int:
        return self.threads * (1 + self.processes) + self.http_threads

    def share(self, index: int) -> int:
        """Operations of client ``index`` (the total split as evenly as possible)."""
        base, extra = divmod(self.ops, self.clients)
        return base + (1 if index < extra else 0)


def run(config: TortureConfig, tick: Tick = lambda _: None) -> TortureReport:
    config = replace(config, run_id=config.run_id or secrets.token_hex(3))
    engine = parse_store_url(config.store_url).engine
    report = TortureReport(
        engine=engine,
        store=config.store_url,
        program=config.program,
        started=datetime.now(UTC),
        clients=_describe(config),
    )
    raw = Ledger(open_store(config.store_url))
    try:
        if engine == "dynamodb":
            from tallybook.store.dynamodb import DynamoStore

            assert isinstance(raw.store, DynamoStore)
            raw.store.create_table()
        w = config.workload
        setup(raw, w)
        start = time.monotonic()
        log, faults, live = _run_clients(config, raw, w, tick)
        reconcile(config, raw)
        report.seconds = time.monotonic() - start
        result = check_program(raw, config.program, log.acked, log.rejected)
    finally:
        raw.close()
    report.ops, report.outcomes, report.faults = log.ops, log.outcomes, faults
    report.live_checks = live.checks
    report.final_checks = result.counts
    report.violations = log.violations + live.violations + result.violations
    return report


def reconcile(config: TortureConfig, raw: Ledger) -> None:
    """The wallet's crash recovery, through the CLI (``tallybook reconcile``).

    ``memory://NAME`` lives in this process only (a child process would open an
    empty store of that name), so there the job runs in this process.
    """
    if parse_store_url(config.store_url).engine == "memory":
        raw.wallet.reconcile(config.program)
        return
    cmd = [sys.executable, "-c", "from tallybook.cli import main; main()", "reconcile"]
    cmd += ["--program", config.program, "--store", config.store_url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise TallybookError(f"tallybook reconcile failed: {done.stderr.strip()[-500:]}")


def _describe(c: TortureConfig) -> str:
    parts = [f"{c.threads} Python threads"]
    if c.processes:
        parts.append(f"{c.processes} processes x {c.threads} Python threads")
    if c.http_threads:
        server = f"`tallybook serve` killed {c.kills}x" if c.kills else "in-process server"
        parts.append(f"{c.http_threads} HTTP threads ({server})")
    parts.append(f"{c.readers} reader(s), {c.accounts} accounts, replay rate {c.replay_rate}")
    return ", ".join(parts)


@dataclass
class _Live:
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


def _run_clients(
    c: TortureConfig, raw: Ledger, w: Workload, tick: Tick
) -> tuple[ClientLog, Counter[str], _Live]:
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    log, faults, live = ClientLog(), Counter[str](), _Live()
    done = ctx.Value("q", 0)

    def count(n: int) -> None:
        with done.get_lock():
            done.value += n

    faulty = FaultyStore(open_store(c.store_url), c.faults.with_seed(c.seed * 1000 + 1))
    server_faults: FaultyStore | None = None
    with ExitStack() as stack:
        stack.callback(faulty.close)
        apis: list[Api] = [PythonApi(Ledger(faulty), c.program)] * c.threads
        killer: threading.Thread | None = None
        if c.http_threads:
            key = raw.keys.create(c.program, "read,write", "torture")[1]
            if c.kills:
                server = stack.enter_context(ProcessServer(c.store_url, c.server_log))
                killer = threading.Thread(target=_killer, args=(c, server, done, stop))
                base_url = server.base_url
            else:
                server_faults = FaultyStore(
                    open_store(c.store_url), c.faults.with_seed(c.seed * 1000 + 2)
                )
                stack.callback(server_faults.close)
                base_url = stack.enter_context(ThreadServer(Ledger(server_faults))).base_url
            for _ in range(c.http_threads):
                http = HttpApi(base_url, key)
                stack.callback(http.close)
                apis.append(http)
        pool = HoldPool()
        clients = [
            Client(f"c{c.seed}-{c.run_id}-{i}", api, w, c.seed * 7919 + i, pool, ClientLog(), stop)
            for i, api in enumerate(apis)
        ]
        readers = [Reader(raw, w, c.seed * 31 + i, stop) for i in range(c.readers)]
        threads = [
            threading.Thread(target=cl.run, args=(c.share(i), count))
            for i, cl in enumerate(clients)
        ]
        reader_threads = [threading.Thread(target=r.run) for r in readers]
        children = _start_processes(c, len(clients), done, stop)
        for t in [*threads, *reader_threads]:
            t.start()
        if killer is not None:
            killer.start()
        seen = 0
        deadline = time.monotonic() + c.max_seconds if c.max_seconds else float("inf")
        while seen < c.ops and (
            any(t.is_alive() for t in threads) or any(p.is_alive() for p, _ in children)
        ):
            now = done.value
            tick(now - seen)
            seen = now
            if time.monotonic() > deadline:
                stop.set()
            time.sleep(0.05)
        for t in threads:
            t.join()
        for proc, queue in children:
            child_log, child_faults = queue.get(timeout=600)
            proc.join(timeout=60)
            log.merge(child_log)
            faults.update(child_faults)
        tick(done.value - seen)
        stop.set()
        for t in reader_threads:
            t.join()
        if killer is not None:
            killer.join()
            faults["sigkill"] += c.kills
    for cl in clients:
        log.merge(cl.log)
    faults.update(faulty.counts)
    if server_faults is not None:
        faults.update(server_faults.counts)
    for r in readers:
        live.checks.update(r.log.checks)
        live.violations += r.log.violations
    return log, faults, live


def _killer(c: TortureConfig, server: ProcessServer, done: Any, stop: threading.Event) -> None:
    """SIGKILL the server each time another 1/(kills+1) of the operations is done."""
    for k in range(1, c.kills + 1):
        target = c.ops * k // (c.kills + 1)
        while done.value < target and not stop.is_set():
            time.sleep(0.02)
        if stop.is_set():
            return
        server.kill()


def _start_processes(
    c: TortureConfig, first_index: int, done: Any, stop: Any
) -> list[tuple[Any, Any]]:
    ctx = mp.get_context("spawn")
    started: list[tuple[Any, Any]] = []
    for p in range(c.processes):
        queue = ctx.Queue()
        shares = [c.share(first_index + p * c.threads + i) for i in range(c.threads)]
        proc = ctx.Process(target=_child, args=(c, p, shares, queue, done, stop), daemon=True)
        proc.start()
        started.append((proc, queue))
    return started


def _child(
    c: TortureConfig, index: int, shares: list[int], queue: Any, done: Any, stop: Any
) -> None:
    """A worker process: ``threads`` Python clients over its own faulty store."""
    # injected faults make the services log warnings by design (as in the parent)
    logging.getLogger("tallybook").setLevel(logging.CRITICAL)
    faulty = FaultyStore(open_store(c.store_url), c.faults.with_seed(c.seed * 1000 + 10 + index))
    api = PythonApi(Ledger(faulty), c.program)
    pool = HoldPool()
    w = c.workload
    clients = [
        Client(
            f"p{c.seed}-{c.run_id}-{index}-{i}",
            api,
            w,
            c.seed * 104729 + index * 100 + i,
            pool,
            ClientLog(),
            stop,
        )
        for i in range(c.threads)
    ]

    def count(n: int) -> None:
        with done.get_lock():
            done.value += n

    threads = [
        threading.Thread(target=cl.run, args=(shares[i], count)) for i, cl in enumerate(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = ClientLog()
    for cl in clients:
        log.merge(cl.log)
    faulty.close()
    queue.put((log, Counter(faulty.counts)))

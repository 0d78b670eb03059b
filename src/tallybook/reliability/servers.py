"""HTTP servers for the workload: uvicorn in a thread, or ``tallybook serve`` in a
subprocess that can be killed with SIGKILL and started again on the same port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tallybook.errors import StoreUnavailable
from tallybook.ledger import Ledger


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(base_url: str, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise StoreUnavailable(f"the HTTP server at {base_url} did not become healthy")


class ThreadServer:
    """``create_app(ledger)`` served by uvicorn in a thread of this process."""

    def __init__(self, ledger: Ledger) -> None:
        import uvicorn

        from tallybook.http.app import create_app

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(ledger),
            host="127.0.0.1",
            port=self.port,
            log_level="error",
            access_log=False,
            log_config=None,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        wait_healthy(self.base_url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class ProcessServer:
    """``tallybook serve`` as a child process; :meth:`kill` sends SIGKILL then restarts it."""

    def __init__(self, store_url: str, log_path: Path | None = None) -> None:
        self.store_url = store_url
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-c",
            "from tallybook.cli import main; main()",
            "serve",
            "--port",
            str(self.port),
            "--store",
            self.store_url,
            "--log-level",
            "error",
        ]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=out, env=env)
        wait_healthy(self.base_url)

    def kill(self, downtime: float = 0.3) -> None:
        """SIGKILL mid-flight, wait, start again on the same port."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1
        time.sleep(downtime)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> ProcessServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

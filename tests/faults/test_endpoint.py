"""The model endpoint misbehaves under running eval jobs, five at once on one engine: a
storm of 429s for a minute (Retry-After 5 s), half of all requests failing with a 500,
stalls that end in a dropped connection, streams cut mid-answer, and a primary endpoint that
is down with a fallback routed to. Every episode is graded once; nothing is lost."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv.testing import Fault, K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import TTFT_S, Job, make_tasks, settle, three_turns

TASKS, SAMPLES = 4, 2
STORM_S = 60.0


def _share(kind: str, share: float, seed: int, **fields: float) -> Callable[..., Fault | None]:
    """A fault of ``kind`` for about ``share`` of the requests (a seeded draw)."""
    draw = random.Random(seed)
    lock = threading.Lock()

    def fault(body: dict[str, Any]) -> Fault | None:
        with lock:
            return Fault(kind=kind, **fields) if draw.random() < share else None  # type: ignore[arg-type]

    return fault


def _storm(seconds: float) -> Callable[..., Fault | None]:
    """429 with Retry-After 5 s for every request in the first ``seconds``."""
    started = time.monotonic()

    def fault(body: dict[str, Any]) -> Fault | None:
        if time.monotonic() - started < seconds:
            return Fault(kind="429", retry_after_s=5.0)
        return None

    return fault


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_endpoint_faults_under_running_jobs(engine: PrivateEngine, tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS)
    scenarios: dict[str, Callable[..., Fault | None] | None] = {
        f"429 storm for {STORM_S:g} s (Retry-After 5 s)": _storm(STORM_S),
        "50% of requests 500": _share("500", 0.5, seed=1),
        "20% of requests stall 5 s, then drop": _share("stall", 0.2, seed=2, stall_s=5.0),
        "30% of streams cut mid-answer": _share("cut", 0.3, seed=3),
        "primary endpoint down, fallback routed": None,
    }
    servers = [K3Server(three_turns, ttft_s=TTFT_S, faults=f) for f in scenarios.values()]
    jobs = []
    for i, (name, server) in enumerate(zip(scenarios, servers, strict=True)):
        server.__enter__()
        job = Job(engine, server, tasks, tmp_path / f"job{i}", samples=SAMPLES, concurrency=2)
        if "fallback" in name:
            job.argv[job.argv.index("--model") + 1] = f"{_dead_url()},{server.base_url}"
        job.start()
        jobs.append(job)
    try:
        codes = [job.wait(timeout=600) for job in jobs]
    finally:
        for server in servers:
            server.__exit__(None, None, None)
    for name, job, code in zip(scenarios, jobs, codes, strict=True):
        assert code == 0, (name, job.outputs[-1][1][-2000:])
    for name, job in zip(scenarios, jobs, strict=True):
        row = settle(name, job, TASKS, SAMPLES, b"")
        assert row.affected > 0, f"{name}: the fault never happened"

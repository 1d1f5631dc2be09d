"""The offline demo: one sandbox, one command, a pause and a resume, with timings.

It is what the README's first command runs until the eval runner lands: proof that the
engine, the base image and the fast path work on this machine."""

from __future__ import annotations

import statistics
import time

import anyio
from pydantic import BaseModel

from agentenv.sandbox import SandboxSpec, create


class DemoReport(BaseModel):
    """Timings of one demo run, in milliseconds."""

    backend: str
    exec_mode: str
    create_ms: float
    first_exec_ms: float
    output: str
    exec_p50_ms: float
    pause_p50_ms: float
    resume_p50_ms: float
    paused_cpu_ns: int
    rounds: int


async def run_demo(spec: SandboxSpec | None = None, rounds: int = 20) -> DemoReport:
    """Create a sandbox, run a command, pause and resume it ``rounds`` times, remove it."""
    t0 = time.perf_counter()
    box = await create(spec)
    async with box:
        created = time.perf_counter()
        first = await box.exec(["sh", "-c", 'echo "hello from $(hostname), $(nproc) cpu"'])
        t_first = time.perf_counter()
        execs, pauses, resumes = [], [], []
        for _ in range(rounds):
            t = time.perf_counter()
            await box.exec(["true"])
            execs.append(time.perf_counter() - t)
        for _ in range(rounds):
            t = time.perf_counter()
            await box.pause()
            pauses.append(time.perf_counter() - t)
            t = time.perf_counter()
            await box.resume()
            resumes.append(time.perf_counter() - t)
        # A busy loop, to show that a paused sandbox uses no CPU.
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        await box.pause()
        before = await box.cpu_usage_ns()
        await anyio.sleep(0.5)
        cpu_paused = await box.cpu_usage_ns() - before
        await box.resume()
    ms = 1000.0
    return DemoReport(
        backend=box.spec.backend,
        exec_mode=getattr(box, "exec_mode", "fast"),  # a backend's own detail, if it has it
        create_ms=(created - t0) * ms,
        first_exec_ms=(t_first - created) * ms,
        output=first.stdout.strip(),
        exec_p50_ms=statistics.median(execs) * ms,
        pause_p50_ms=statistics.median(pauses) * ms,
        resume_p50_ms=statistics.median(resumes) * ms,
        paused_cpu_ns=cpu_paused,
        rounds=rounds,
    )

"""The engine's stale answers to pause and resume, provoked (issue 16): under load, Docker
sometimes answers a pause with 409 "already paused" or a resume with 409 "not paused" while
the container is the opposite (3 in ~1,500 cycles once, on a loaded host), and runc's
cgroup-v1 freezer sometimes gives up ("unable to freeze"). agentenv reconciles each with the
container's real state and retries (``container.set_frozen``); this stress counts how often
that happened and whether any cycle still failed.

N sandboxes, each with a CPU burner inside (busy: processes start and run while freezing),
freezing through the engine (``freezer="engine"``: the path with the stale answers), cycle
pause/resume concurrently with no pause between calls, on a host their burners keep busy.
Printed: cycles, cycles that failed (target 0), conflicts reconciled (by kind), pause+resume
p50/p99 per cycle.

Usage: ``.venv/bin/python bench/freeze_conflicts.py [--sandboxes 8] [--cycles 1500]
[--freezer engine|auto]`` (``auto``: agentenv's default, the cgroup written from the host).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections import Counter

import anyio

from agentenv.sandbox import Sandbox, SandboxSpec, create

# one process spinning, one starting processes all the time (what makes freezing race)
BURN = (
    "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & "
    "nohup sh -c 'while :; do /bin/true; done' >/dev/null 2>&1 &"
)


class _Conflicts(logging.Handler):
    """Counts the reconciled conflicts agentenv logs (``sandbox.freeze_conflict``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.kinds: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "sandbox.freeze_conflict":
            fields = record.__dict__.get("agentenv_fields") or {}
            error = str(fields.get("error", ""))
            kind = next(
                (k for k in ("already paused", "not paused", "unable to freeze") if k in error),
                "other",
            )
            self.kinds[f"{'pause' if fields.get('want') else 'resume'}: {kind}"] += 1


async def main(sandboxes: int, cycles: int, freezer: str) -> None:
    handler = _Conflicts()
    logger = logging.getLogger("agentenv.sandbox.container")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    times: list[float] = []
    failed: list[str] = []
    boxes: list[Sandbox] = []
    try:
        for _ in range(sandboxes):
            box = await create(SandboxSpec(freezer=freezer))
            boxes.append(box)
            await box.exec(BURN)

        async def cycle(box: Sandbox, n: int) -> None:
            for _ in range(n):
                started = time.perf_counter()
                try:
                    await box.pause()
                    await box.resume()
                except Exception as e:
                    failed.append(f"{type(e).__name__}: {e}")
                    return
                times.append(time.perf_counter() - started)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for box in boxes:
                tg.start_soon(cycle, box, cycles // sandboxes)
        wall = time.monotonic() - started
    finally:
        for box in boxes:
            await box.close()
    times.sort()
    print(f"{len(times)} cycles in {wall:.1f} s on {sandboxes} busy sandboxes ({freezer} freezer)")
    print(f"failed cycles: {len(failed)} (target 0)" + (f": {failed[:3]}" if failed else ""))
    total = sum(handler.kinds.values())
    print(f"conflicts reconciled: {total}" + (f" ({dict(handler.kinds)})" if total else ""))
    if times:
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        print(f"pause+resume per cycle: p50 {statistics.median(times) * 1e3:.1f} ms, "
              f"p99 {p99 * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=1500)
    parser.add_argument("--freezer", choices=("engine", "auto"), default="engine")
    args = parser.parse_args()
    anyio.run(main, args.sandboxes, args.cycles, args.freezer)

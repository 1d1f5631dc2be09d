"""A compose environment of 3 services (``main`` and two beside it: an HTTP service built
from a folder, with a healthcheck ``main`` waits for, and a plain one) against one sandbox,
in one run (issue 31): start (until ``main`` takes commands), pause and resume of the whole
group (every service's cgroup frozen from this host, all at once) against one sandbox's,
and teardown (containers, network, volume). The images are built before the first round,
so start is the containers', not the build's.

Usage: ``.venv/bin/python bench/compose.py [--rounds 5] [--cycles 40]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from agentenv.sandbox import Sandbox, SandboxSpec, create
from agentenv.sandbox.compose.sandbox import create_compose

# the compose environment is the suite's (tests/ is not installed): the repository's root first
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.formats.test_harbor_compose import write_environment

SPEC = SandboxSpec(workdir="/app", image_entrypoint=True)


def ms(samples: list[float]) -> str:
    """p50 (p90) in milliseconds."""
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"{statistics.median(ordered) * 1e3:8.2f} ({p90 * 1e3:.2f})"


async def cycle(box: Sandbox, cycles: int, into: dict[str, list[float]]) -> None:
    """Pause and resume ``box`` ``cycles`` times, timing each."""
    for _ in range(cycles):
        started = time.perf_counter()
        await box.pause()
        paused = time.perf_counter()
        await box.resume()
        into["pause"].append(paused - started)
        into["resume"].append(time.perf_counter() - paused)
        await anyio.sleep(0.005)  # a model's turn, briefly


async def main(rounds: int, cycles: int) -> None:
    found: dict[str, dict[str, list[float]]] = {
        kind: {"start": [], "pause": [], "resume": [], "teardown": []}
        for kind in ("compose (3 services)", "one sandbox")
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = write_environment(Path(tmp))
        warm = await create_compose(SPEC, path, {})  # builds the service's image once
        await warm.close()
        for _ in range(rounds):  # the two kinds interleaved, round by round
            for kind in found:
                started = time.perf_counter()
                box: Sandbox = await (
                    create_compose(SPEC, path, {}) if kind.startswith("compose") else create(SPEC)
                )
                assert (await box.exec("true")).ok
                found[kind]["start"].append(time.perf_counter() - started)
                await cycle(box, cycles, found[kind])
                started = time.perf_counter()
                await box.close()
                found[kind]["teardown"].append(time.perf_counter() - started)
    print(f"{rounds} rounds, {cycles} pause/resume cycles each; ms p50 (p90)")
    print(f"{'':22}{'start':>18}{'pause':>18}{'resume':>18}{'teardown':>18}")
    for kind, phases in found.items():
        print(f"{kind:22}" + "".join(f"{ms(v):>18}" for v in phases.values()))
    group, one = found["compose (3 services)"], found["one sandbox"]
    for phase in ("start", "pause", "resume", "teardown"):
        ratio = statistics.median(group[phase]) / statistics.median(one[phase])
        print(f"  {phase}: compose / one sandbox = {ratio:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=40)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.cycles)

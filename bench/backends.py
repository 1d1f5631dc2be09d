"""Backends side by side: the same sandbox operations on Docker (the baseline) and Podman,
measured in one run, printed as Podman over Docker.

Per backend, interleaved round by round so that a noisy neighbour hurts both alike:
- **create**: ``create(spec)`` to a sandbox whose first ``exec`` answered, then ``close``;
- **exec**: round trip of ``exec(["true"])`` through the in-sandbox executor;
- **pause** and **resume**: one each, on a sandbox at rest, the default way (the cgroup
  freezer written from this host) and the engine's (``SandboxSpec.freezer="engine"``);
- **download**: a 10 MB workdir, read as a tar while frozen (how ``finish`` reads it).

Podman's figures are what its design costs: every engine call (create, the engine's pause
and resume, copy) starts the ``podman`` binary, where Docker's are HTTP requests to a
running daemon.

Usage: ``.venv/bin/python bench/backends.py [--rounds N]`` (needs both engines: run
``AGENTENV_WITH_PODMAN=1 bash scripts/setup.sh`` first).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio

from agentenv.sandbox import Sandbox, SandboxSpec, create

BACKENDS = ("docker", "podman")


def ms(samples: list[float]) -> tuple[float, float]:
    """p50 and p90 in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(0.9 * (len(ordered) - 1))] * 1e3


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


async def create_once(backend: str) -> float:
    started = time.perf_counter()
    box = await create(SandboxSpec(backend=backend))
    await box.exec(["true"])
    took = time.perf_counter() - started
    await box.close()
    return took


async def main(rounds: int) -> None:
    figures: dict[str, dict[str, list[float]]] = {b: {} for b in BACKENDS}
    boxes: dict[str, Sandbox] = {}
    try:
        for backend in BACKENDS:
            boxes[backend] = box = await create(SandboxSpec(backend=backend, read_only=True))
            await box.exec("head -c 10000000 /dev/urandom > /workspace/data.bin")
            await box.exec(["true"])  # warm
        for _ in range(rounds):
            for backend, box in boxes.items():
                f = figures[backend]
                f.setdefault("exec", []).append(await timed(functools.partial(box.exec, ["true"])))
                f.setdefault("pause", []).append(await timed(box.pause))
                f.setdefault("download (10 MB, paused)", []).append(
                    await timed(functools.partial(box.download, "/workspace"))
                )
                f.setdefault("resume", []).append(await timed(box.resume))
                # the engine's own pause, which the direct freezer replaced (the bench's own
                # knob: a spec is otherwise fixed for a sandbox's life)
                box.spec = box.spec.model_copy(update={"freezer": "engine"})
                f.setdefault("pause (engine)", []).append(await timed(box.pause))
                f.setdefault("resume (engine)", []).append(await timed(box.resume))
                box.spec = box.spec.model_copy(update={"freezer": "auto"})
        for _ in range(max(3, rounds // 4)):
            for backend in BACKENDS:
                figures[backend].setdefault("create → first exec", []).append(
                    await create_once(backend)
                )
    finally:
        for box in boxes.values():
            await box.close()
    head = ("operation", "docker p50/p90 ms", "podman p50/p90 ms", "podman/docker")
    print(f"{head[0]:28} {head[1]:>20} {head[2]:>20} {head[3]:>14}")
    for op in figures["docker"]:
        d50, d90 = ms(figures["docker"][op])
        p50, p90 = ms(figures["podman"][op])
        print(f"{op:28} {d50:9.1f} /{d90:8.1f} {p50:9.1f} /{p90:8.1f} {p50 / d50:13.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    anyio.run(main, parser.parse_args().rounds)

"""Pause and resume with and without the engine in the path (issue 14), in one run.

Both through ``Sandbox.pause``/``resume``; the two ways differ by ``SandboxSpec.freezer``:

- **engine** (``freezer="engine"``, what every pause was before): dockerd → containerd →
  shim → a fresh ``runc`` process per call, which the engine serialises (Podman: a
  ``podman pause`` process each).
- **direct** (``freezer="auto"``, the default where this host may write the container's
  cgroup): the freezer written by this process (v1 ``freezer.state``, v2
  ``cgroup.freeze``), waiting until every task is frozen.

Two figures per path: one sandbox at rest (pause and resume separately), and N sandboxes
cycling at once, each turn "pause, think a little, resume", timed per turn as pause plus
resume. The same containers serve both paths (the freezer is switched between rounds, with
every sandbox running); the direct path's figure is given as a ratio of the engine path's,
measured in the same run, and the engine path is measured again after to show the drift.

Usage: ``.venv/bin/python bench/freeze.py [--sandboxes 100] [--turns 10] [--rounds 40]
[--backend docker|podman]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import anyio

from agentenv.sandbox import Sandbox, SandboxSpec, cgroup, create

THINK_S = (0.005, 0.05)  # how long a sandbox stays paused in a turn: the model's time
PATHS = {"engine": "engine", "direct": "auto"}  # path -> SandboxSpec.freezer


def use(boxes: list[Sandbox], path: str) -> None:
    """Switch running sandboxes to a way of freezing (the bench's own knob: a spec is
    otherwise fixed for a sandbox's life)."""
    for box in boxes:
        assert not box.paused
        box.spec = box.spec.model_copy(update={"freezer": PATHS[path]})


def p50_p99(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(0.99 * (len(ordered) - 1))] * 1e3


async def single(box: Sandbox, rounds: int) -> dict[str, dict[str, list[float]]]:
    """One sandbox at rest, the paths interleaved round by round."""
    found: dict[str, dict[str, list[float]]] = {p: {"pause": [], "resume": []} for p in PATHS}
    for _ in range(rounds):
        for name in PATHS:
            use([box], name)
            started = time.perf_counter()
            await box.pause()
            paused = time.perf_counter()
            await box.resume()
            found[name]["pause"].append(paused - started)
            found[name]["resume"].append(time.perf_counter() - paused)
    return found


async def cycling(boxes: list[Sandbox], path: str, turns: int) -> list[float]:
    """Every sandbox takes ``turns`` turns at once; the time of each pause plus resume."""
    taken: list[float] = []
    rng = random.Random(7)
    use(boxes, path)

    async def one(box: Sandbox) -> None:
        await anyio.sleep(rng.uniform(0, THINK_S[1]))  # not all in step
        for _ in range(turns):
            started = time.perf_counter()
            await box.pause()
            spent = time.perf_counter() - started
            await anyio.sleep(rng.uniform(*THINK_S))
            started = time.perf_counter()
            await box.resume()
            taken.append(spent + time.perf_counter() - started)

    async with anyio.create_task_group() as tg:
        for box in boxes:
            tg.start_soon(one, box)
    return taken


async def main(sandboxes: int, turns: int, rounds: int, backend: str) -> None:
    boxes: list[Sandbox] = []
    spec = SandboxSpec(backend=backend, memory="64m", labels={"agentenv-bench": "freeze"})
    limit = anyio.Semaphore(8)

    async def make() -> None:
        async with limit:
            box = await create(spec)
            boxes.append(box)
            await box.exec("nohup sleep 100000 >/dev/null 2>&1 &")  # something to freeze

    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(sandboxes):
                tg.start_soon(make)
        print(f"{sandboxes} sandboxes made in {time.perf_counter() - started:.1f} s ({backend})")
        if cgroup.freezer(boxes[0].id) is None:
            raise SystemExit("no writable cgroup freezer here: the direct path would fall back")
        one = await single(boxes[0], rounds)
        many = {path: await cycling(boxes, path, turns) for path in ("engine", "direct")}
        many["engine, again"] = await cycling(boxes, "engine", turns)  # drift in the run
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for box in boxes:
                    tg.start_soon(box.close)
    print(f"{'':44} {'engine p50/p99 ms':>20} {'direct p50/p99 ms':>20} {'direct/engine':>14}")
    for op in ("pause", "resume"):
        e50, e99 = p50_p99(one["engine"][op])
        d50, d99 = p50_p99(one["direct"][op])
        label = f"one sandbox at rest: {op}"
        print(f"{label:44} {e50:9.2f} /{e99:8.2f} {d50:9.2f} /{d99:8.2f} {d50 / e50:13.3f}x")
    e50, e99 = p50_p99(many["engine"])
    d50, d99 = p50_p99(many["direct"])
    a50, a99 = p50_p99(many["engine, again"])
    label = f"{sandboxes} cycling: pause + resume per turn"
    print(f"{label:44} {e50:9.2f} /{e99:8.2f} {d50:9.2f} /{d99:8.2f} {d50 / e50:13.3f}x")
    print(f"{'  (engine path again, after)':44} {a50:9.2f} /{a99:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandboxes", type=int, default=100)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--backend", choices=("docker", "podman"), default="docker")
    args = parser.parse_args()
    anyio.run(main, args.sandboxes, args.turns, args.rounds, args.backend)

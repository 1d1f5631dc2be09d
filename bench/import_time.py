"""Cold import benchmark: how long ``import agentenv`` takes in a fresh interpreter, as a
trainer that imports it pays on every worker start.

Each figure is the median of ``--runs`` fresh interpreters, alternating between the
commands so that machine noise falls on all of them alike:

- ``python -c pass``: the interpreter alone;
- the baseline: ``import pydantic, anyio, structlog, docker``, the dependencies any import
  of agentenv needs;
- ``import agentenv``, and which heavy modules it left loaded (``openai``, the local K3
  server's ``http.server``).

Printed: each median in ms, and ``import agentenv`` over the baseline (a ratio, since these
machines are noisy).

Usage: ``.venv/bin/python bench/import_time.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "interpreter": "pass",
    "baseline": "import pydantic, anyio, structlog, docker",
    "agentenv": "import agentenv",
}
PROBE = (
    "import sys, json, agentenv; print(json.dumps({m: m in sys.modules for m in "
    "('openai', 'http.server', 'agentenv.testing', 'rich', 'typer')}))"
)


def once(code: str) -> float:
    """Seconds for one fresh interpreter to run ``code``."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> None:
    """Time every command ``--runs`` times, interleaved; print medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for code in COMMANDS.values():  # warm the file cache: "cold" means a new process
        once(code)
    for _ in range(args.runs):
        for name, code in COMMANDS.items():
            times[name].append(once(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
        ).stdout
    )
    for name, code in COMMANDS.items():
        print(f"{name:<12} {medians[name] * 1000:7.0f} ms   ({code})")
    ratio = medians["agentenv"] / medians["baseline"]
    print(f"import agentenv / baseline: {ratio:.2f}x")
    print("left loaded by import agentenv: " + ", ".join(f"{m}={v}" for m, v in loaded.items()))


if __name__ == "__main__":
    main()

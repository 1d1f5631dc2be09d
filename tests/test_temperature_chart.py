"""The temperature-chart task's verifier compares the plot with the data: through the real
episode and verifier, in real sandboxes, the reference solution (gnuplot) and an honest
Pillow chart score 1.0, doing nothing scores 0, and so do charts that only look like the
answer: three coloured dots, three flat lines in the right colours, the right colours
plotting other data (reversed, shuffled, or the agent's own rewritten data file), smooth
seasonal curves instead of the readings, a solid image in one colour, a chart of one series
only, and one series drawn (shifted) in all three colours. The episodes run concurrently,
once per module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from agentenv.agent.loop import Trajectory
from agentenv.agent.policies import oracle
from agentenv.runner.episode import run_task
from agentenv.tasks import load_task

pytestmark = pytest.mark.anyio
TASK = Path(__file__).resolve().parents[1] / "environments" / "temperature-chart"
CHART_CHECK = "each city's line follows its readings"

# A Pillow chart of temperatures.csv, honest or forged by MODE (argv[1]), saved as chart.png.
DRAW = """
import csv
import math
import random
import sys

from PIL import Image, ImageDraw

mode = sys.argv[1]
cities = ["Oslo", "Madrid", "Cairo"]
colour = {"Oslo": (0, 0, 255), "Madrid": (0, 160, 0), "Cairo": (255, 0, 0)}
rows = list(csv.DictReader(open("temperatures.csv")))
series = {c: [float(r["temp_c"]) for r in rows if r["city"] == c] for c in cities}
if mode == "shuffled":
    rng = random.Random(7)
    for values in series.values():
        rng.shuffle(values)
if mode == "seasonal":  # each city's seasonal curve, not its readings
    shape = {"Oslo": (6.0, 9.0), "Madrid": (16.0, 8.0), "Cairo": (24.0, 6.0)}
    for c, (mean, amp) in shape.items():
        series[c] = [mean - amp * math.cos(2 * math.pi * (2 * i + 10) / 365) for i in range(183)]
if mode == "one-colour":
    img = Image.new("RGB", (1000, 600), colour["Oslo"])
    img.save("chart.png")
    sys.exit()
img = Image.new("RGB", (1000, 600), "white")
draw = ImageDraw.Draw(img)
left, right, top, bottom, low, high = 80, 960, 40, 540, -10.0, 35.0
draw.rectangle([left, top, right, bottom], outline="black")
draw.text((450, 10), "Temperature, 2023", fill="black")
for k, city in enumerate(cities):
    ink = colour[city]
    values = series[city]
    if mode == "same-series":  # Oslo's readings, raised 10 degrees for each further city
        values = [t + 10 * k for t in series["Oslo"]]
    step = (right - left) / (len(values) - 1)
    points = [
        (left + i * step, bottom - (t - low) / (high - low) * (bottom - top))
        for i, t in enumerate(values)
    ]
    if mode == "dots":
        draw.ellipse([100 + 40 * k, 100, 112 + 40 * k, 112], fill=ink)
        continue
    if mode == "flat":
        points = [(left, 150 + 120 * k), (right, 150 + 120 * k)]
    if mode == "one-series" and city != "Oslo":
        continue
    draw.line(points, fill=ink, width=2)
    draw.rectangle([left + 12, top + 12 + 18 * k, left + 24, top + 24 + 18 * k], fill=ink)
    draw.text((left + 30, top + 12 + 18 * k), city, fill="black")
img.save("chart.png")
"""


def pillow(mode: str) -> str:
    """An agent's script: draw chart.png with Pillow in ``mode``."""
    return f"cat > /tmp/draw.py <<'EOF'\n{DRAW}\nEOF\npython3 /tmp/draw.py {mode}\n"


def solution() -> str:
    return (TASK / "solution.sh").read_text()


# gnuplot with the reference's colours, each city's readings in reverse order along x.
REVERSED_GNUPLOT = """
gnuplot <<'GP'
set terminal png size 1000,600
set output 'chart.png'
set key top left
plot for [c in "Oslo Madrid Cairo"] \\
  sprintf("< grep ',%s,' temperatures.csv | tac | cut -d, -f3", c) using 0:1 with lines \\
  linewidth 2 linecolor rgb (c eq "Oslo" ? "#0000ff" : c eq "Madrid" ? "#00a000" : "#ff0000") \\
  title c
GP
"""

# The agent rewrites the data file (temperatures shuffled), then plots it faithfully.
REWRITTEN_DATA = """
python3 - <<'EOF'
import random
lines = open("temperatures.csv").read().splitlines()
head, rows = lines[0], [r.split(",") for r in lines[1:]]
temps = [r[2] for r in rows]
random.Random(3).shuffle(temps)
body = [",".join(r[:2] + [t]) for r, t in zip(rows, temps)]
open("temperatures.csv", "w").write("\\n".join([head] + body) + "\\n")
EOF
"""

CASES = {
    "nothing (no chart.png)": (lambda: "true\n", 0.0),
    "oracle (gnuplot)": (solution, 1.0),
    "honest Pillow chart": (lambda: pillow("honest"), 1.0),
    "three coloured dots": (lambda: pillow("dots"), 0.0),
    "three flat lines": (lambda: pillow("flat"), 0.0),
    "series reversed (gnuplot)": (lambda: REVERSED_GNUPLOT, 0.0),
    "series shuffled": (lambda: pillow("shuffled"), 0.0),
    "smooth seasonal curves": (lambda: pillow("seasonal"), 0.0),
    "data file rewritten, then plotted": (lambda: REWRITTEN_DATA + solution(), 0.0),
    "all one colour": (lambda: pillow("one-colour"), 0.0),
    "one series only": (lambda: pillow("one-series"), 0.0),
    "Oslo's series in all three colours": (lambda: pillow("same-series"), 0.0),
}


def test_hidden_data_is_the_workspace_data() -> None:
    hidden = (TASK / "tests" / "temperatures.csv").read_bytes()
    assert hidden == (TASK / "workspace" / "temperatures.csv").read_bytes()


NOT_A_CHART = {"nothing (no chart.png)", "all one colour"}  # the image check fails too
CONCURRENCY = 6


@pytest.fixture(scope="module")
async def episodes() -> AsyncIterator[dict[str, Trajectory]]:
    """Every case's episode, run concurrently (one after another they take minutes)."""
    out: dict[str, Trajectory] = {}
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(case: str) -> None:
        script, _ = CASES[case]
        async with limiter:
            out[case], _ = await run_task(load_task(TASK), oracle(script(), timeout_s=120))

    async with anyio.create_task_group() as tg:
        for case in CASES:
            tg.start_soon(one, case)
    yield out


@pytest.mark.parametrize("case", list(CASES))
async def test_chart(case: str, episodes: dict[str, Trajectory]) -> None:
    _, reward = CASES[case]
    traj = episodes[case]
    bash = [r for turn in traj.turns for r in turn.tool_results if r.name == "bash"]
    assert len(bash) == 1 and bash[0].exit_code == 0, bash[0].output[-2000:]
    score = traj.score
    assert score is not None and score.error is None, score
    checks = {c.name: c for c in score.checks}
    details = " | ".join(c.detail for c in score.checks)
    assert checks[CHART_CHECK].score == reward, details
    assert score.reward == reward, details
    if case not in NOT_A_CHART:  # a valid, non-blank PNG: only the plot's content fails
        assert [c.score for n, c in checks.items() if n != CHART_CHECK] == [1.0], details

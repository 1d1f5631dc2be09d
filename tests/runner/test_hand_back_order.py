"""An episode's sandboxes are handed back off the verdict's path, never left behind: the
agent's while verification runs (its final state already taken), the checker's once its
verdict is in; the episode returns only once both are handed back, and nothing of the run
is left (recycled or not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentenv.agent import policies
from agentenv.runner import episode as lifecycle
from agentenv.runner.episode import run_task
from agentenv.sandbox import get_backend, recycling
from agentenv.sandbox.labels import run_id
from agentenv.tasks import Task, load_task

pytestmark = pytest.mark.anyio


def make_task(root: Path) -> Task:
    folder = root / "order"
    (folder / "workspace").mkdir(parents=True)
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "solution.sh").write_text("echo ok > answer.txt\n")
    (folder / "task.toml").write_text(
        '[verifier]\nkind = "command"\ncommand = "grep -qx ok answer.txt"\n'
    )
    return load_task(folder)


def ours() -> set[str]:
    return {r.id for r in get_backend().leftovers() if r.kind == "sandbox" and r.run == run_id()}


@pytest.mark.parametrize("recycled", [False, True])
async def test_sandboxes_go_off_the_verdicts_path_and_none_is_left(
    recycled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    verify, hand_back = lifecycle.verify, lifecycle.hand_back

    async def verified(box: Any, *args: Any, **kwargs: Any) -> Any:
        score = await verify(box, *args, **kwargs)
        events.append(("verdict", box.id))
        return score

    async def handed(box: Any, **kwargs: Any) -> None:
        events.append(("hand back", box.id))
        await hand_back(box, **kwargs)
        events.append(("handed back", box.id))

    monkeypatch.setattr(lifecycle, "verify", verified)
    monkeypatch.setattr(lifecycle, "hand_back", handed)
    task = make_task(tmp_path)
    assert task.solution is not None
    before = ours()
    if recycled:
        async with recycling():
            traj, _ = await run_task(task, policies.oracle(task.solution.read_text()))
            events.append(("returned", ""))
    else:
        traj, _ = await run_task(task, policies.oracle(task.solution.read_text()))
        events.append(("returned", ""))
    assert traj.reward == 1.0, traj.error
    (checker,) = [box for what, box in events if what == "verdict"]
    given = [box for what, box in events if what == "hand back"]
    assert len(given) == 2 and checker in given, events
    agent = next(box for box in given if box != checker)
    at = {event: i for i, event in enumerate(events)}
    # the agent's sandbox goes while the checks run; the checker's only after its verdict
    assert at[("hand back", agent)] < at[("verdict", checker)], events
    assert at[("verdict", checker)] < at[("hand back", checker)], events
    # both are handed back before the episode returns; nothing of the run is left
    assert max(at[("handed back", agent)], at[("handed back", checker)]) < at[("returned", "")]
    assert ours() <= before

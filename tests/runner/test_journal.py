"""The journal behind results.jsonl and report.jsonl: a line cut by a kill is dropped (and,
for a job about to append, cut off); a bad complete line never takes later lines with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.agent.export import NoTokens, to_concat
from agentenv.agent.loop import Trajectory, Turn
from agentenv.model.types import Completion
from agentenv.runner.results import EpisodeResult, append_result, load_results


def test_cut_and_bad_lines(tmp_path: Path) -> None:
    append_result(tmp_path, EpisodeResult(task_id="a", sample=0, outcome="graded"))
    with open(tmp_path / "results.jsonl", "ab") as f:
        f.write(b'{"task_id": "b", "sample": 0, "outcome": "from the future"}\n')
    append_result(tmp_path, EpisodeResult(task_id="c", sample=0, outcome="graded"))
    with open(tmp_path / "results.jsonl", "ab") as f:
        f.write(b'{"task_id": "d", "sam')
    before = (tmp_path / "results.jsonl").read_bytes()
    assert sorted(load_results(tmp_path)) == [("a", 0), ("c", 0)]
    assert (tmp_path / "results.jsonl").read_bytes() == before  # reading never writes
    assert sorted(load_results(tmp_path, repair=True)) == [("a", 0), ("c", 0)]
    after = (tmp_path / "results.jsonl").read_bytes()
    assert after == before[: before.rfind(b"\n") + 1]  # only the cut tail went
    append_result(tmp_path, EpisodeResult(task_id="d", sample=0, outcome="graded"))
    assert sorted(load_results(tmp_path)) == [("a", 0), ("c", 0), ("d", 0)]


def test_logprobs_that_do_not_line_up_are_refused() -> None:
    done = Completion(token_ids=[1, 2, 3], prompt_token_ids=[9], logprobs=[-0.1, -0.2])
    traj = Trajectory(
        task_id="t", messages=[], turns=[Turn(completion=done, model_s=0, tools_s=0, paused_s=0)]
    )
    with pytest.raises(NoTokens, match="3 token ids but 2 logprobs"):
        to_concat(traj)

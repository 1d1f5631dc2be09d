"""The journal behind results.jsonl and report.jsonl: a line cut by a kill is dropped (and,
for a job about to append, cut off); a bad complete line never takes later lines with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.agent.export import NoTokens, to_concat
from agentenv.agent.loop import Trajectory, Turn
from agentenv.eval.summary import summarize
from agentenv.model.types import Completion
from agentenv.runner.journal import write_json
from agentenv.runner.results import EpisodeResult, append_result, load_results

pytestmark = pytest.mark.no_docker


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


def test_results_written_before_phases_and_budgets_still_read_and_summarize(
    tmp_path: Path,
) -> None:
    old = (
        b'{"task_id": "task-10", "sample": 0, "outcome": "graded", "reward": 1.0, '
        b'"passed": true, "attempts": 1, "turns": 2, "wall_s": 3.5, "cost_usd": 0.5}\n'
        b'{"task_id": "task-9", "sample": 0, "outcome": "graded", "reward": 0.0, '
        b'"passed": false, "wall_s": 1.5}\n'
    )
    (tmp_path / "results.jsonl").write_bytes(old)
    results = load_results(tmp_path)
    assert results[("task-10", 0)].phases == {} and results[("task-10", 0)].run is None
    rows = summarize(list(results.values()), 1)
    assert [r.task_id for r in rows] == ["task-9", "task-10", "total"]
    total = rows[-1]
    assert total.wall_s == 5.0 and total.phases == {} and total.job_wall_s is None
    assert total.episodes_per_s is None and total.usd_per_solved == 0.5


def test_a_summary_is_written_whole_and_never_through_a_link(tmp_path: Path) -> None:
    job, mine = tmp_path / "job", tmp_path / "mine.json"
    job.mkdir()
    mine.write_text("the user's own file\n")
    # links planted at the summary's name and at the name a write once used for its partial
    # file: the new summary replaces the first; neither is written through
    (job / "summary.json").symlink_to(mine)
    (job / ".summary.json.tmp").symlink_to(mine)
    write_json(job / "summary.json", [{"task_id": "total"}])
    assert mine.read_text() == "the user's own file\n"
    assert not (job / "summary.json").is_symlink()
    assert json.loads((job / "summary.json").read_text()) == [{"task_id": "total"}]
    assert oct((job / "summary.json").stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in job.iterdir()) == [".summary.json.tmp", "summary.json"]

"""bench/verify_share.py reads any revision's results.jsonl the same way, and its tracer
names the verdict path's operations by what they run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

pytestmark = pytest.mark.no_docker


@pytest.fixture(scope="module")
def share():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        import verify_share

        yield verify_share
    finally:
        sys.path.remove(str(BENCH))


def test_results_of_revisions_with_other_fields(share, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [
        # a revision that splits verification into more phases and has fields of its own
        {"task_id": "a", "sample": 0, "wall_s": 10.0, "reward": 1.0, "suspicious": ["x"],
         "phases": {"create": 1.0, "finish": 0.5, "verify": 3.0, "verify_layout": 0.5,
                    "teardown": 1.0}},
        # an older line: no phases, no sample
        {"task_id": "b", "wall_s": 2.0},
        # the same episode again (a retry): the last line wins
        {"task_id": "a", "sample": 0, "wall_s": 8.0, "phases": {"finish": 1.0, "verify": 3.0}},
        "not json",
    ]  # fmt: skip
    (tmp_path / "results.jsonl").write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    )
    job = share.read_job("work", 1, tmp_path, 30.0, None)
    assert job.verification == {"a": 4.0, "b": 0.0}
    assert job.episode == {"a": 8.0, "b": 2.0}
    assert job.share == pytest.approx(4.0 / 10.0)
    assert job.cli_share == pytest.approx(3.0 / 4.0)
    assert share.is_verification("verify_layout") and not share.is_verification("teardown")


def test_the_tracer_names_operations(share) -> None:  # type: ignore[no-untyped-def]
    import traced_eval as t

    stop = ["python3", "-I", "/agentenv/verifiers/stop_agent.py", "1000:1000"]
    assert t.exec_kind(stop, None) == "exec: stop_agent"
    assert t.exec_kind("mkdir -p /agentenv && find /agentenv -mindepth 1", None).endswith(
        "lay out /agentenv"
    )
    empty = "mkdir -p /w && find /w /tmp -mindepth 1 -maxdepth 1 -exec rm -rf {} + && chown 1:1 /w"
    assert t.exec_kind(empty, None) == "exec: empty workdir, /tmp"
    assert t.exec_kind("bash /agentenv/tests/mk.sh fresh", None) == "exec: the check's own"
    assert t.exec_kind("make", "1000:1000") == "exec: the check's own (as agent)"
    assert t.interpreter_starts(stop) == 1 and t.interpreter_starts("bash x.sh") == 0

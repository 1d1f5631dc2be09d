"""What a check's verdict is made of: :class:`CheckResult` (one check) and :class:`Score`
(the verifier's whole answer)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class CheckResult(BaseModel):
    """One check's outcome (a leaf of the task's ``[verifier]``). ``error`` means the check
    could not be made, which is not the agent failing it."""

    name: str = Field(
        description="the check's `name` in task.toml, else made from its kind and what it "
        "checks (`command make test`, `file answer.txt`; a swebench check's two lists are "
        "`FAIL_TO_PASS` and `PASS_TO_PASS`; a Harbor task's, each reward's key; `agent's "
        "final state` when the checks could not run on what the agent left)"
    )
    score: float = Field(
        description="in [0, 1]: 1 or 0, or the fraction of tests passed for a pytest check "
        "with `partial = true`"
    )
    passed: bool = Field(description="full marks (score 1) and the check could be made")
    detail: str = Field(
        "",
        description="what the check saw, for a person: the tail of a command's output after "
        "its exit code, `3/4 passed; failed: ...`, `content differs: ...`, `timed out after "
        "300 s`",
    )
    error: bool = Field(
        False,
        description="the check could not be made (a test file that does not collect, a "
        "checker that crashed): then the Score's `error` names it and its reward is not valid",
    )
    exit_code: int | None = Field(
        None, description="a command check's exit code; None for every other kind"
    )
    duration_s: float = Field(
        0.0, description="seconds the check ran (command and swebench checks; 0 for others)"
    )
    tests: dict[str, str] | None = Field(
        None,
        description="a swebench check's: each listed test's outcome (`passed`, `failed`, "
        "`error`, `skipped`, `missing`); None for other kinds",
    )
    suspicious: list[str] = Field(
        default_factory=list,
        description="signs that the agent's code worked on the verdict rather than the task, "
        "seen by an in-process pytest check (a report that differs from what its parent "
        "process saw, pytest's internals patched, an `__eq__` that ignores what it is "
        "compared with, pytest configuration the agent added); the check's `on_suspicious` "
        "says whether it then scored 0 (`zero`) or as the tests went (`review`)",
    )


class StepScore(BaseModel):
    """One step's verdict in a multi-step task (Harbor's ``[[steps]]``)."""

    name: str = Field(description="the step's name (its folder under steps/)")
    reward: float = Field(description="in [0, 1]: the step's reward (0 when `error`)")
    passed: bool = Field(description="full marks, and no error")
    error: str | None = Field(None, description="why the step's verifier could not score")
    detail: str = Field(
        "", description="what it saw: test.sh's exit and output, or why the step did not run"
    )
    stopped: bool = Field(
        False, description="the task stopped after this step (below its `min_reward`, or an error)"
    )


class Score(BaseModel):
    """What a verifier gave: reward in [0, 1], passed, the checks, and ``error`` when the
    verifier itself failed (then the reward is not valid)."""

    reward: float = Field(
        description="in [0, 1]: the verifier's score (a composite's combination of its "
        "checks, a partial pytest check's fraction); 0 when `error` is set, and then not a "
        "valid reward (`Trajectory.reward` is None)"
    )
    passed: bool = Field(description="full marks: reward 1, and no error")
    checks: list[CheckResult] = Field(
        [],
        description="each check's result, in the order of task.toml (a composite's parts, "
        "not the composite itself); empty when the verifier could not start",
    )
    error: str | None = Field(
        None,
        description="why the verifier itself could not score (a check that could not be "
        "made, the checker sandbox failing); None when it scored",
    )
    duration_s: float = Field(
        0.0, description="seconds the verification took, the checker sandbox's layout included"
    )
    suspicious: list[str] = Field(
        default_factory=list,
        description="every check's `suspicious` findings, each prefixed with the check's "
        "name (filled from `checks` when not given); an episode with any is flagged for "
        "review in results and the viewer",
    )
    steps: list[StepScore] = Field(
        default_factory=list,
        description="a multi-step task's: each step run, in order, with its reward (the "
        "task's reward is their mean or the last's, as the task says); empty otherwise",
    )

    @model_validator(mode="after")
    def _gather_suspicious(self) -> Score:
        if not self.suspicious:
            self.suspicious = [f"{c.name}: {s}" for c in self.checks for s in c.suspicious]
        return self

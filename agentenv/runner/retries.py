"""One episode of a job with its retries: run it, classify a failure by the outcome table,
retry what the table retries, and make the episode's result (time split into phases). Every
executor of an eval job (local, Ray) runs episodes through this."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from agentenv.agent.trajectory import Spend, Trajectory
from agentenv.errors import JobStopped
from agentenv.log import get_logger
from agentenv.runner.artifacts import write_artifacts
from agentenv.runner.budget import Metered
from agentenv.runner.episode import run_task
from agentenv.runner.outcomes import TREATMENT, Outcome, classify
from agentenv.runner.policy import Policies
from agentenv.runner.results import EpisodeResult, write_atomic
from agentenv.sandbox import EngineUnavailable, SandboxError, default_backend, get_backend
from agentenv.tasks import Task

log = get_logger(__name__)


class EpisodeSettings(BaseModel):
    """How every episode of a job runs: made once (by the CLI, or by you), it goes from
    :func:`~agentenv.eval.jobs.run_eval` to the executor with each episode, as JSON to a
    Ray node if need be. Nothing else carries these."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="a preset (kimi-k3), URL[,URL], oracle, null, command:CMD")
    attempts: int = Field(3, ge=1, description="tries per episode on infrastructure failures")
    keep_final: bool = Field(False, description="keep each agent's final workspace to regrade")
    reasoning_effort: str | None = Field(None, description="passed to the model (K3: 'max')")
    backend: str = Field(
        default_factory=default_backend, min_length=1, description="the sandbox backend"
    )
    engine_wait_s: float = Field(
        120.0,
        ge=0,
        description="how long an episode waits for a sandbox engine that stopped answering "
        "(restarting, say) before the job stops",
    )
    agent: str | None = Field(
        None,
        description="the harness that plays each episode (mini-swe-agent, codex, claude-code, "
        "...; see agentenv.runner.harness); None: agentenv's built-in loop",
    )


MAX_OUTAGES = 8  # host troubles one episode waits out; past this they are its attempts
# where an engine keeps its own data: "no space left" there is the host's disk, not a
# sandbox's bounded workdir (a full workdir is the agent's doing)
_ENGINE_DATA = ("overlay", "/containers/", "/volumes/", "/image/", "/snapshots/", "/tmp/docker")


def _answers(backend: str) -> bool:
    """Whether the sandbox engine answers now (listing our objects: every backend can)."""
    try:
        get_backend(backend).leftovers()
    except EngineUnavailable:
        return False
    except SandboxError:
        return True  # it answered, with an error
    return True


async def _host_trouble(error: Exception, backend: str) -> str | None:
    """What is wrong with the host rather than the episode, if anything: the sandbox
    engine's disk full, or the engine not answering."""
    text = str(error).lower()
    if "no space left on device" in text and any(m in text for m in _ENGINE_DATA):
        return "its disk is full"
    if not await anyio.to_thread.run_sync(_answers, backend, abandon_on_cancel=True):
        return "it does not answer"
    return None


async def _wait_out(trouble: str, backend: str, budget_s: float, pause_s: float) -> bool:
    """Wait for the host's trouble to pass, at most ``budget_s``: an engine that does not
    answer is asked again until it does; a full disk cannot be asked, so the attempt is
    simply made again after ``pause_s``. ``False`` when the budget ran out."""
    if budget_s <= 0:
        return False
    if trouble == "its disk is full":
        await anyio.sleep(min(pause_s, budget_s))
        return True
    deadline = time.monotonic() + budget_s
    delay = 0.5
    while not await anyio.to_thread.run_sync(_answers, backend, abandon_on_cancel=True):
        if time.monotonic() + delay > deadline:
            return False
        await anyio.sleep(delay)
        delay = min(2 * delay, 5.0)
    return True


def split_phases(phases: dict[str, float], traj: Trajectory | None, wall_s: float) -> None:
    """Split the loop's time into ``model`` and ``tools`` (from the trajectory's turns),
    and put what no phase accounts for into ``other``, so the phases add up to ``wall_s``.
    A harness's episode also has ``harness``: its own time outside any turn (starting up
    before its first call, above all)."""
    loop = phases.pop("loop", None)
    if traj is not None and loop is not None:
        phases["model"] = sum(t.model_s for t in traj.turns)
        phases["tools"] = sum(t.tools_s for t in traj.turns)
        if traj.harness is not None:
            phases["harness"] = max(0.0, loop - phases["model"] - phases["tools"])
    elif loop is not None:
        phases["loop"] = loop  # a failed episode: no turns to split it by
    phases["other"] = max(0.0, wall_s - sum(phases.values()))


def _result_from(
    task: Task,
    sample: int,
    traj: Trajectory,
    attempts: int,
    kept: str | None,
    phases: dict[str, float],
    wall_s: float,
    spent: Spend,
) -> EpisodeResult:
    score = traj.score
    outcome: Outcome = "graded"
    if score is None:
        outcome, error = "verifier_error", "the task has no verifier"
    elif score.error is not None:
        outcome, error = "verifier_error", score.error
    else:
        error = None
    graded = TREATMENT[outcome].graded
    return EpisodeResult(
        task_id=task.id,
        sample=sample,
        agent=traj.harness.name if traj.harness is not None else None,
        outcome=outcome,
        reward=score.reward if graded and score else None,
        passed=bool(graded and score and score.passed),
        stop_reason=traj.stop_reason,
        error=error,
        attempts=attempts,
        turns=len(traj.turns),
        **Spend.of(spent),
        wall_s=wall_s,
        phases=phases,
        trajectory=f"trajectories/{task.id}/{sample}.json",
        final_state=kept,
        score=score,
        suspicious=list(score.suspicious) if score else [],
    )


async def run_episode_with_retries(
    task: Task,
    sample: int,
    settings: EpisodeSettings,
    policies: Policies,
    *,
    out: Path | None = None,
) -> tuple[EpisodeResult, Trajectory | None]:
    """One episode, retried on infrastructure failures per the outcome table: its result,
    and its trajectory unless it ended in an error. With ``settings.keep_final`` the agent's
    final workspace is written to ``out/finals/<task>/<sample>.tar`` for regrading. Its
    ``wall_s`` and its spend (tokens, dollars) are the whole episode's, retries included
    (a failed attempt's turns were paid for too); ``phases`` split its time. ``policies``
    are ``settings.model``'s (made once per process: they hold its connections)."""
    started = time.monotonic()
    spent = Spend()
    attempts = settings.attempts
    outages, outage_s = 0, 0.0  # the host's trouble waited out: not the episode's attempts
    attempt = 0
    while attempt < attempts:
        attempt += 1
        attempt_started = time.monotonic()
        again = attempt > 1 or outages > 0
        phases = {"retries": attempt_started - started} if again else {}
        try:
            model = Metered(policies.for_task(task), spent)
            traj, final = await run_task(
                task, model, phases=phases, backend=settings.backend, agent=settings.agent
            )
            kept = taken = None
            if settings.keep_final and out is not None and final.rejected is None:
                kept = f"finals/{task.id}/{sample}.tar"
                write_atomic(out / kept, final.workspace)
            if out is not None and final.artifacts is not None:
                taken = f"artifacts/{task.id}/{sample}"
                write_artifacts(final.artifacts, out / taken)
        except Exception as e:  # classified by the outcome table, not handled ad hoc
            outcome = classify(e)
            treatment = TREATMENT[outcome]
            log.warning(
                "episode.failed",
                task=task.id,
                sample=sample,
                attempt=attempt,
                outcome=outcome,
                error=f"{type(e).__name__}: {e}",
            )
            # the engine down (restarting, say) or its disk full: not the episode's fault,
            # and every episode would fail alike; waited out, the attempt does not count,
            # and if it lasts past engine_wait_s the job stops (a resume finishes it)
            trouble = None
            if outcome in ("sandbox_lost", "task_error") and outages < MAX_OUTAGES:
                trouble = await _host_trouble(e, settings.backend)
            if trouble is not None:
                outages += 1
                log.warning("episode.host_trouble", task=task.id, sample=sample, trouble=trouble)
                waited = time.monotonic()
                budget = settings.engine_wait_s - outage_s
                if not await _wait_out(trouble, settings.backend, budget, min(2.0**outages, 10)):
                    waited = outage_s + time.monotonic() - waited
                    raise JobStopped(
                        f"the {settings.backend} engine: {trouble} (waited {waited:.0f} s of "
                        f"--engine-wait {settings.engine_wait_s:g}; {type(e).__name__}: {e})",
                        resumable=True,
                    ) from e
                outage_s += time.monotonic() - waited
                attempt -= 1
                continue
            if treatment.stop_job:
                raise JobStopped(f"{outcome}: {type(e).__name__}: {e}") from e
            # nobody answers at any endpoint this task may use: every episode would wait
            # out its retries alike, so the job stops (a resume runs what did not finish)
            down = policies.down(task) if outcome == "endpoint_down" else None
            if down is not None:
                raise JobStopped(f"the model endpoint {down}", resumable=True) from e
            if treatment.retry and attempt < attempts:
                continue
            wall_s = time.monotonic() - started
            split_phases(phases, None, wall_s)
            error = EpisodeResult(
                task_id=task.id,
                sample=sample,
                outcome=outcome,
                error=f"{type(e).__name__}: {e}",
                attempts=attempt,
                **Spend.of(spent),
                wall_s=wall_s,
                phases=phases,
            )
            return error, None
        wall_s = time.monotonic() - started
        split_phases(phases, traj, wall_s)
        result = _result_from(task, sample, traj, attempt, kept, phases, wall_s, spent)
        return result.model_copy(update={"artifacts": taken}), traj
    raise AssertionError("unreachable: the last attempt always returns")


__all__ = ["EpisodeSettings", "run_episode_with_retries", "split_phases"]

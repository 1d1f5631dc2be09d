"""agentenv as a PrimeIntellect ``verifiers.v1`` environment (verifiers 0.4.0, the API its
``vf-eval`` and prime-rl run): a folder of agentenv tasks is a v1 ``Taskset``, each task's
hidden verifier is its ``@vf.reward``, and :class:`AgentenvHarness` plays the agent seat as
an in-process loop: it asks the policy at the endpoint verifiers hands it (verifiers'
interception server, which records every turn on the trace and owns the real model client)
and runs each answer through :meth:`agentenv.rl.driven.DrivenEpisode.act`, the task's
sandbox **frozen while the policy generates**::

    uv run vf-eval agentenv_verifiers --env.taskset.tasks '["environments/"]' \\
        --env.agent.runtime.type subprocess ...

or in Python, through verifiers' own eval runner (what ``vf-eval`` calls)::

    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig
    episodes = await run_eval(EvalConfig.model_validate({"env": {
        "taskset": {"id": PLUGIN_ID, "tasks": ["environments/"]},
        "agent": {"runtime": {"type": "subprocess"}}}, ...}))

How verifiers' rollout maps onto an agentenv episode:

* :class:`AgentenvTaskset` loads the tasks at ``tasks`` (its config) and yields one
  :class:`AgentenvTask` per task: its instruction as the prompt, its id, and the paths it
  came from (the harness reloads it by id: a trace's task data must be JSON);
* :meth:`AgentenvHarness.launch` (one segment, the whole episode) opens the episode (the
  task's setup, a sandbox at its prepared state, frozen), then until the episode ends: one
  model call at ``endpoint`` with the episode's messages and tools, one ``act``. The act
  that ends the episode verifies it in a checker sandbox; the outcome goes to the trace's
  ``info["agentenv"]`` (:class:`Outcome`). The episode is closed in a ``finally``: when the model
  call fails, verifiers records the harness's error on the trace and nothing is left;
* :meth:`AgentenvTask.hidden_verifier`, the task's one ``@vf.reward``, reads that verdict
  (the model never sees the verifier). A rollout that failed is not scored (0.0).

verifiers' own runtime (where a harness's program would run) is left to
``subprocess`` and unused: agentenv's sandbox is the task's box, and v1's runtimes are a
closed list. Its plugin id must be a top-level module (v1 imports ``verifiers.v1.tasksets.
<id>`` or ``<id>``; a dotted id fails in ``importlib.util.find_spec``): :data:`PLUGIN_ID`,
see ``docs/verifiers.md``.

Installed with ``pip install 'agentenv[verifiers-v1]'``. verifiers 0.4.0 pins ``mcp==2.0.0``
and ``openai<3``, which clash with ``agentenv[mcp]`` (and ``[dev]``): it lives in a venv of
its own (``scripts/verifiers_venv.sh 0.4.0`` builds the tests' one).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel, Field

from agentenv.agent.trajectory import Limits
from agentenv.errors import TaskError
from agentenv.integrations.tasksets import load_tasks, prompt_of
from agentenv.model.client import OpenAIChatModel
from agentenv.rl.driven import open_episode
from agentenv.tasks import Task

VERIFIERS_VERSION = "0.4.0"
"""The verifiers release this module is written and tested against (``agentenv[verifiers-v1]``)."""

PLUGIN_ID = "agentenv_verifiers"
"""The taskset (and harness) id verifiers loads this module by: a top-level name, since v1
cannot import a dotted id (see :func:`register`)."""

_INSTALL = (
    f"pip install 'verifiers=={VERIFIERS_VERSION}' (or 'agentenv[verifiers-v1]'), in a venv "
    "without agentenv[mcp] or [dev]: verifiers pins mcp==2.0.0"
)

try:
    # by name: agentenv's checkout has a verifiers/ folder of its own (the checker programs),
    # which type checkers would take for this package
    vf: Any = importlib.import_module("verifiers.v1")
except ImportError as e:  # fail fast, naming the command that installs it
    raise ImportError(
        f"agentenv.integrations.verifiers_v1 needs verifiers.v1: {_INSTALL}. (Run from "
        "agentenv's checkout, its own verifiers/ folder of checker programs shadows the "
        f"package: run from elsewhere.) ({e})"
    ) from e

__all__ = [
    "INFO_KEY",
    "PLUGIN_ID",
    "VERIFIERS_VERSION",
    "AgentenvHarness",
    "AgentenvHarnessConfig",
    "AgentenvTask",
    "AgentenvTaskData",
    "AgentenvTaskset",
    "AgentenvTasksetConfig",
    "Outcome",
    "register",
]


class AgentenvTaskData(vf.TaskData):  # type: ignore[misc]
    """A task's wire data: verifiers' (``id`` is the agentenv task's id, ``prompt`` its
    instruction) and ``paths``, the task paths its taskset loaded it from."""

    paths: list[str]


INFO_KEY = "agentenv"
"""The key of a trace's ``info`` holding the episode's outcome, as :class:`Outcome` JSON
(``info`` goes out with the trace, to ``traces.jsonl`` and the trainer; ``state`` does not)."""


class Outcome(BaseModel):
    """A rollout's agentenv outcome (``trace.info["agentenv"]``): the hidden verifier's
    reward (``None`` until the episode ended by itself), why it ended, how many acts ran,
    and the episode's trajectory (its messages, phase timings, cost, the verifier's score)."""

    reward: float | None = None
    stop_reason: str | None = None
    acts: int = 0
    trajectory: dict[str, Any] | None = None


class AgentenvTask(vf.Task[AgentenvTaskData, vf.State]):  # type: ignore[misc]
    """One agentenv task as a verifiers task: scored by its hidden verifier."""

    @vf.reward(weight=1.0)  # type: ignore[untyped-decorator]
    async def hidden_verifier(self, trace: Any) -> float:
        """The verdict of the task's hidden verifier, run by the act that ended the episode
        (1.0 passed, 0.0 failed; a partial score as the verifier gives it); 0.0 for an
        episode that did not end by itself."""
        outcome = Outcome.model_validate(trace.info.get(INFO_KEY) or {})
        return float(outcome.reward or 0.0)


class AgentenvTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """``--env.taskset.*``: ``tasks``, the agentenv task paths (task folders, folders of
    them, instance files)."""

    tasks: list[str] = Field(default_factory=list)


class AgentenvTaskset(vf.Taskset[AgentenvTask, AgentenvTasksetConfig]):  # type: ignore[misc]
    """The graded agentenv tasks at the config's ``tasks``, one :class:`AgentenvTask` each."""

    def load(self) -> Iterator[Any]:
        """One :class:`AgentenvTask` per runnable task with a verifier (the others are left
        out with a warning); :class:`~agentenv.errors.TaskError` when there is none."""
        paths = list(self.config.tasks)
        for task in load_tasks(paths):
            data = AgentenvTaskData(id=task.id, name=task.id, prompt=prompt_of(task), paths=paths)
            yield AgentenvTask(data, self.config.task)


class AgentenvHarnessConfig(vf.HarnessConfig):  # type: ignore[misc]
    """``--env.agent.harness.*``: the sandbox ``backend`` (else ``AGENTENV_BACKEND``, else
    Docker), the episode ``limits`` (else each task's own; agentenv's
    :class:`~agentenv.agent.trajectory.Limits`, e.g. ``--env.agent.harness.limits.max-turns
    30``), and the completion budget of each model call."""

    backend: str | None = None
    limits: Limits | None = None
    max_completion_tokens: int = 32_768


@cache
def _tasks(paths: tuple[str, ...]) -> dict[str, Task]:
    """The tasks at ``paths`` by id (loaded once per process)."""
    return {t.id: t for t in load_tasks(paths)}


class AgentenvHarness(vf.Harness[AgentenvHarnessConfig]):  # type: ignore[misc]
    """The agent seat as agentenv's driven episode: an in-process loop, every model call
    through verifiers' interception endpoint, every answer run in the task's sandbox,
    frozen between acts."""

    # the model's commands run in agentenv's sandbox, never in verifiers' runtime: the
    # host-runtime warning and the container requirement are about the latter
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False
    # the episode builds its own opening messages (the task's system prompt among them)
    APPENDS_SYSTEM_PROMPT = True

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        **kwargs: Any,
    ) -> Any:
        """Run the task's whole episode: open it, then model call, act, until it ends (its
        outcome to ``trace.info["agentenv"]``); close it whatever happens. A model call that
        fails raises (verifiers records it as the rollout's error)."""
        task = _tasks(tuple(data.paths)).get(data.id)
        if task is None:
            raise TaskError(f"no task {data.id!r} at {data.paths}")
        outcome = Outcome()
        trace.info[INFO_KEY] = outcome.model_dump(mode="json")  # even if it never opens
        # retries are the interception's (it owns the upstream client): one attempt here
        model = OpenAIChatModel(
            base_url=endpoint,
            api_key=secret,
            model=ctx.model,
            max_attempts=1,
            max_completion_tokens=self.config.max_completion_tokens,
        )
        try:
            episode = await open_episode(
                task, limits=self.config.limits, backend=self.config.backend
            )
            try:
                while not episode.done:
                    completion = await model.complete(episode.messages, episode.tools)
                    acted = await episode.act(completion)
                    outcome.acts += 1
                    if acted.done:
                        outcome.reward = acted.reward
                        outcome.stop_reason = acted.stop_reason
                        if acted.trajectory is not None:
                            outcome.trajectory = acted.trajectory.model_dump(mode="json")
            finally:
                trace.info[INFO_KEY] = outcome.model_dump(mode="json")
                await episode.close()  # shielded: also when verifiers' timeout cancels us
        finally:
            await model.aclose()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def register() -> None:
    """Make this module importable as :data:`PLUGIN_ID` in this process, so verifiers finds
    it by that id (``vf-eval``'s and prime-rl's config names a taskset by id). An install
    that ships the top-level module ``agentenv_verifiers`` needs no call."""
    sys.modules.setdefault(PLUGIN_ID, sys.modules[__name__])

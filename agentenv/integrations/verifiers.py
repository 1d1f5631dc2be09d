"""agentenv as a PrimeIntellect ``verifiers`` environment (the classic API of verifiers 0.3.1,
what ``vf.MultiTurnEnv`` trainers such as prime-rl run): a folder of agentenv tasks is its
dataset, each task's hidden verifier is its reward, and each rollout is an agentenv episode in
its own sandbox, **frozen while the policy generates**::

    from agentenv.integrations.verifiers import load_environment

    env = load_environment(["environments/"])          # a vf.MultiTurnEnv
    out = await env.evaluate(client=vf.OpenAIChatCompletionsClient(AsyncOpenAI(...)),
                             model="kimi-k3", num_examples=-1, rollouts_per_example=4)

It stands on :mod:`agentenv.rl.driven` and maps verifiers' hooks onto a
:class:`~agentenv.rl.driven.DrivenEpisode` without running an episode's lifecycle itself:

* ``setup_state`` opens the episode (the task's setup once, a sandbox at its prepared state)
  and makes the rollout's prompt and tools the episode's own (the opening messages the
  agent loop builds; its tool schemas);
* ``env_response`` hands the model's last assistant message to
  :meth:`~agentenv.rl.driven.DrivenEpisode.act` and answers with the messages the act added
  (tool results; a bad call answered as an error to the model). The act that ends the
  episode verifies it in a checker sandbox; its messages become the final env response;
* the rubric's one reward, :func:`hidden_verifier`, reads that verdict (the model never sees
  the verifier); an episode verifiers stopped itself (a model error, its own turn cap or
  timeout) scores 0.0;
* a ``@vf.cleanup`` handler (run in ``rollout``'s ``finally``, so also when the model endpoint
  fails mid-rollout) closes the episode: its sandbox is removed.

Installed with ``pip install 'agentenv[verifiers]'``. verifiers pins ``mcp<2``, which clashes
with ``agentenv[mcp]`` (and ``[dev]``): it lives in a venv of its own (``scripts/
verifiers_venv.sh`` builds the tests' one). This is the only module of agentenv that imports
verifiers, and ``import agentenv`` does not import it. ``docs/verifiers.md`` says why the
classic API and not 0.4.0's ``verifiers.v1``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.agent.trajectory import Limits
from agentenv.integrations.tasksets import load_tasks, prompt_of
from agentenv.rl.driven import ActionError, DrivenEpisode, open_episode
from agentenv.tasks import Task

VERIFIERS_VERSION = "0.3.1"
"""The verifiers release this module is written and tested against (``agentenv[verifiers]``)."""

_INSTALL = (
    f"pip install 'verifiers=={VERIFIERS_VERSION}' (or 'agentenv[verifiers]'), in a venv "
    "without agentenv[mcp] or [dev]: verifiers pins mcp<2"
)

try:
    # by name: agentenv's checkout has a verifiers/ folder of its own (the checker programs),
    # which type checkers would take for this package
    vf: Any = importlib.import_module("verifiers")
    Dataset: Any = importlib.import_module("datasets").Dataset
except ImportError as e:  # fail fast, naming the command that installs it
    raise ImportError(f"agentenv.integrations.verifiers needs verifiers: {_INSTALL}") from e
if not hasattr(vf, "MultiTurnEnv"):  # 0.4.0 keeps only verifiers.v1
    raise ImportError(
        f"agentenv.integrations.verifiers speaks verifiers' classic Environment API, which "
        f"verifiers {getattr(vf, '__version__', '?')} (at {vf.__file__}) does not have: "
        f"{_INSTALL}. (Run from agentenv's checkout, its own verifiers/ folder of checker "
        "programs shadows the package: run from elsewhere.)"
    )

__all__ = [
    "VERIFIERS_VERSION",
    "AgentenvEnv",
    "EpisodeFailed",
    "hidden_verifier",
    "load_environment",
    "load_tasks",
    "task_rows",
]

TASK_KEY = "agentenv_task"
"""The key of a dataset row's ``info`` naming its task (verifiers reserves ``info["task"]``)."""

STATE_KEY = "agentenv"
"""The rollout state's key holding the episode's outcome (JSON: it may go to the outputs)."""


class EpisodeFailed(vf.SandboxError):  # type: ignore[misc]
    """An episode that could not be opened or whose sandbox died: verifiers records it as
    the rollout's error (``state["error"]``, the rollout scored 0.0); the others go on."""


def task_rows(tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """The dataset rows of ``tasks``: a ``prompt`` (the instruction, as the user's message;
    each rollout's real opening messages are its episode's) and ``info`` naming the task.
    No ``answer``: what grades a task is hidden in its sandbox, not in the dataset."""
    return [
        {
            "prompt": [{"role": "user", "content": prompt_of(task)}],
            "info": {TASK_KEY: task.id},
        }
        for task in tasks
    ]


def hidden_verifier(state: dict[str, Any]) -> float:
    """The rollout's reward: the verdict of its task's hidden verifier, run when the
    episode ended (1.0 passed, 0.0 failed; a partial score as the verifier gives it). An
    episode that did not end by itself (a model error, verifiers' own caps) scores 0.0."""
    outcome = state.get(STATE_KEY) or {}
    return float(outcome.get("reward") or 0.0)


def _text(content: Any) -> str:
    """A verifiers message's content as text (a list of parts: their text, joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def _action(message: Any) -> dict[str, Any]:
    """The model's last message (verifiers' ``AssistantMessage``) as the assistant message
    :meth:`~agentenv.rl.driven.DrivenEpisode.act` takes."""
    if getattr(message, "role", None) != "assistant":
        raise ActionError(f"the last message is not the model's but {message!r}")
    return {
        "role": "assistant",
        "content": _text(message.content),
        "reasoning_content": message.reasoning_content or "",
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls or []
        ],
    }


def _replies(messages: list[dict[str, Any]]) -> list[Any]:
    """An act's added messages (tool results; a multi-step task's next instruction) as
    verifiers messages."""
    out: list[Any] = []
    for m in messages:
        content = m.get("content")
        text = content if isinstance(content, str) else _text(content)
        if m["role"] == "tool":
            out.append(vf.ToolMessage(tool_call_id=m["tool_call_id"], content=text))
        elif m["role"] == "system":
            out.append(vf.SystemMessage(content=text))
        else:
            out.append(vf.UserMessage(content=text))
    return out


def _refusal(message: Any, error: ActionError) -> list[Any]:
    """The answer to a message the episode refused (nothing ran): the error, as each of its
    tool calls' result, or as a user message when it made none."""
    text = f"error: {error}"
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return [vf.UserMessage(content=text)]
    return [vf.ToolMessage(tool_call_id=c.id, content=text) for c in calls]


def _tool(schema: dict[str, Any]) -> Any:
    """An OpenAI tool schema (``{"type": "function", "function": {...}}``) as a ``vf.Tool``."""
    function = schema.get("function", schema)
    return vf.Tool(
        name=function["name"],
        description=function.get("description") or "",
        parameters=function.get("parameters") or {"type": "object", "properties": {}},
    )


class AgentenvEnv(vf.MultiTurnEnv):  # type: ignore[misc]
    """A verifiers ``MultiTurnEnv`` whose rollouts are agentenv episodes of ``tasks``, each
    in its own sandbox, frozen while the policy generates, rewarded by the task's hidden
    verifier (:func:`hidden_verifier`). ``limits`` (else each task's own) end an episode as
    they end any agentenv episode, verified; ``backend`` is the sandbox backend (else
    ``AGENTENV_BACKEND``, else Docker). Other keywords go to ``vf.MultiTurnEnv`` (its
    ``max_turns`` defaults to none: the episode's limits stop it, with a verdict).

    Build it on the main thread: verifiers' ``Environment`` installs signal handlers."""

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        limits: Limits | None = None,
        backend: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.tasks: dict[str, Task] = {t.id: t for t in tasks}
        """The tasks by id (a dataset row's ``info["agentenv_task"]``)."""
        self.limits = limits
        self.backend = backend
        self._episodes: dict[str, DrivenEpisode] = {}  # by the rollout's trajectory_id
        kwargs.setdefault("dataset", Dataset.from_list(task_rows(tasks)))
        kwargs.setdefault("rubric", vf.Rubric(funcs=[hidden_verifier]))
        super().__init__(**kwargs)

    @property
    def open_episodes(self) -> int:
        """How many episodes are open now (each holds a sandbox)."""
        return len(self._episodes)

    async def setup_state(self, state: Any) -> Any:
        """Open the rollout's episode; its opening messages become the rollout's prompt and
        its tools the rollout's tools. :class:`EpisodeFailed` when it cannot be opened."""
        task_id = (state.get("info") or {}).get(TASK_KEY)
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise EpisodeFailed(f"the dataset row names no task of this environment: {task_id!r}")
        try:
            episode = await open_episode(task, limits=self.limits, backend=self.backend)
        except Exception as e:  # a task that cannot be prepared fails this rollout only
            raise EpisodeFailed(f"task {task.id}: the episode did not open: {e}") from e
        self._episodes[state["trajectory_id"]] = episode
        state["prompt"] = _replies(episode.messages)
        state["tool_defs"] = [_tool(t) for t in episode.tools]
        state[STATE_KEY] = {"task_id": task.id, "reward": None, "stop_reason": None}
        return await super().setup_state(state)

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        """Run the model's last message in the episode (thawed for it, frozen again after)
        and answer with what it added; the act that ends the episode records its verdict
        and ends the rollout. A malformed message is answered as an error, nothing run;
        :class:`EpisodeFailed` when the sandbox died (the episode is closed)."""
        episode = self._episodes[state["trajectory_id"]]
        last = messages[-1]
        try:
            acted = await episode.act(_action(last))
        except ActionError as e:
            return _refusal(last, e)
        except Exception as e:  # the sandbox or the checker failed: this rollout only
            raise EpisodeFailed(f"task {episode.task.id}: the episode failed: {e}") from e
        replies = _replies(acted.messages)
        if acted.done:
            state[STATE_KEY].update(reward=acted.reward, stop_reason=acted.stop_reason)
            if acted.trajectory is not None:  # cost, phase timings, tokens: on request
                state["agentenv_trajectory"] = acted.trajectory.model_dump(mode="json")
            state["final_env_response"] = replies
        return replies

    @vf.cleanup  # type: ignore[untyped-decorator]
    async def close_episode(self, state: Any) -> None:
        """Close the rollout's episode (its sandbox removed) unless it finished: run in
        ``rollout``'s ``finally``, after an error or a timeout as well."""
        episode = self._episodes.pop(state.get("trajectory_id"), None)
        if episode is not None:
            await episode.close()

    @vf.teardown  # type: ignore[untyped-decorator]
    async def close_all(self) -> None:
        """Close every episode still open (verifiers runs this when the environment is torn
        down: at exit, or on SIGINT/SIGTERM)."""
        while self._episodes:
            _, episode = self._episodes.popitem()
            await episode.close()


def load_environment(
    tasks: Sequence[Path | str] | Path | str,
    *,
    limits: Limits | dict[str, Any] | None = None,
    backend: str | None = None,
    **kwargs: Any,
) -> AgentenvEnv:
    """The environment of the tasks at ``tasks`` (a path, or several: task folders, folders
    of them). It is verifiers' ``load_environment`` convention, so
    ``vf.load_environment("agentenv.integrations.verifiers", tasks=...)`` (what a trainer's
    config names: an env id and its args) loads it; ``limits`` may then be a plain mapping.
    Keywords as :class:`AgentenvEnv`."""
    paths = [tasks] if isinstance(tasks, str | Path) else list(tasks)
    if isinstance(limits, dict):
        limits = Limits.model_validate(limits)
    return AgentenvEnv(load_tasks(paths), limits=limits, backend=backend, **kwargs)

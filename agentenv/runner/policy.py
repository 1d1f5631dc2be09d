"""Policies by name, as the CLI and job configs spell them: ``kimi-k3`` (or another preset),
an OpenAI-compatible base URL, several of those separated by commas (routed, with
fallback, in that order), ``oracle`` (the task's solution.sh), ``null`` (does nothing) or
``command:CMD`` (runs CMD, a deterministic codemod, instead of a model).

A job makes one :class:`Policies` and asks it for each episode's model: endpoint clients are
shared by every episode, and so are their concurrency limits and routing state.
"""

from __future__ import annotations

from agentenv.agent import policies
from agentenv.errors import JobStopped, TaskError
from agentenv.log import get_logger
from agentenv.model.client import OpenAIChatModel
from agentenv.model.endpoints import Endpoint, resolve_endpoint
from agentenv.model.probe import Health
from agentenv.model.router import Router
from agentenv.model.types import ChatModel
from agentenv.tasks import Task

BUILT_IN = ("oracle", "null")

log = get_logger(__name__)


class Policies:
    """The policy for each episode of a job."""

    def __init__(
        self,
        spec: str,
        *,
        reasoning_effort: str | None = None,
        command_timeout_s: float = 1800.0,
    ):
        self.spec = spec
        self.command_timeout_s = command_timeout_s  # a command: policy's, before it is killed
        self.router: Router | None = None
        if spec not in BUILT_IN and not spec.startswith("command:"):
            endpoints = [resolve_endpoint(part.strip()) for part in spec.split(",")]

            def client(endpoint: Endpoint) -> ChatModel:
                return OpenAIChatModel.for_endpoint(endpoint, reasoning_effort=reasoning_effort)

            for endpoint in endpoints:  # fail now, clearly, on a missing key or bad option
                endpoint.api_key()
                endpoint.request_options(reasoning_effort=reasoning_effort)
            self.router = Router(endpoints, make_model=client)

    def for_task(self, task: Task) -> ChatModel:
        """The model that plays one episode of ``task``."""
        if self.spec == "oracle":
            if task.multi_step is not None:  # each step's solution in its turn
                _needs(task, "the oracle", ("write_file", "bash", "submit"))
                from agentenv.runner.steps import steps_oracle

                return steps_oracle(task)
            if task.solution is None:
                raise TaskError(
                    f"task {task.id!r} has no solution.sh (or solution/solve.sh) for the oracle"
                )
            _needs(task, "the oracle", ("write_file", "bash", "submit"))
            # a Harbor task's solve.sh looks for its files where Harbor puts them
            harbor = task.verifier is not None and task.verifier.kind == "harbor"
            return policies.oracle(
                task.solution.read_text(),
                files=task.solution_files(),
                solution_dir=policies.HARBOR_SOLUTION_DIR if harbor else None,
                env=task.solution_env,
            )
        if self.spec.startswith("command:"):
            _needs(task, "a command policy", ("bash", "submit"))
            return policies.command(
                self.spec.removeprefix("command:"), timeout_s=self.command_timeout_s
            )
        if self.spec == "null" or self.router is None:
            return policies.null()
        return self.router.for_task(task.tags, task_id=task.id)

    async def probe(self, *, timeout_s: float = 10.0) -> list[Health]:
        """Probe each endpoint once (none for ``oracle``, ``null`` and ``command:``); a dead
        one is skipped from now on, so that episodes start on the fallback if there is one."""
        return [] if self.router is None else await self.router.probe(timeout_s=timeout_s)

    def down(self, task: Task | None = None) -> str | None:
        """Why no endpoint that ``task`` (any task, without one) may use answers, when that
        is so (see :meth:`Router.down`): the job should stop rather than start more
        episodes."""
        return None if self.router is None else self.router.down(task.tags if task else [])

    def failed_requests(self) -> int:
        """Model requests that failed so far (retried or not), over every endpoint."""
        if self.router is None:
            return 0
        return sum(getattr(m, "failed_requests", 0) for m in self.router.models())

    async def aclose(self) -> None:
        """Close the endpoint clients."""
        if self.router is not None:
            await self.router.aclose()


def _needs(task: Task, policy: str, tools: tuple[str, ...]) -> None:
    """A scripted policy calls these tools: refuse a task that does not offer them, rather
    than let every call come back refused."""
    offered = {tool.name for tool in task.agent_tools}
    missing = [name for name in tools if name not in offered]
    if missing:
        raise TaskError(
            f"task {task.id!r} offers the tools {sorted(offered)}; {policy} needs "
            f"{', '.join(missing)} too"
        )


async def check_endpoints(policies: Policies) -> list[str]:
    """Probe the job's model endpoints before the first episode (see
    :mod:`agentenv.model.probe`): raise :class:`JobStopped` when none answers (resumable:
    nothing ran) or one refuses the key; return what is amiss but not fatal (a dead
    endpoint with a live fallback, a 404 on ``/models``), for the console."""
    health = await policies.probe()
    for h in health:
        if h.auth_refused:
            raise JobStopped(f"the model endpoint {h.endpoint} refused the key ({h.detail})")
    dead = [h for h in health if not h.up]
    if health and len(dead) == len(health):
        said = "; ".join(f"{h.endpoint} {h.detail}" for h in dead)
        raise JobStopped(
            f"the model endpoint {said} (probed before the first episode; none ran)",
            resumable=True,
        )
    notes = [f"{h.endpoint} {h.detail}" for h in health if h.detail]
    for note in notes:
        log.warning("job.endpoint", note=note)
    return notes

"""What the model of an episode is offered and told: the one path every driver takes.

A task's model is offered agentenv's tools (the task's ``tools``) beside the tools of its
MCP servers (:func:`agentenv.agent.mcp.mcp_tools`: their sessions open for as long as the
offer is), and told each instruction followed by the block naming the skills in its
``skills_dir`` (:mod:`agentenv.agent.skills`, read once when the offer opens).
:func:`~agentenv.runner.episode.run_task`, its steps (:mod:`agentenv.runner.steps`) and an
RL :class:`~agentenv.rl.rollout.Rollout` all take them from :func:`offered`, so a task is
the same task whichever of them runs it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from agentenv.agent.mcp import mcp_tools
from agentenv.agent.skills import read_skills, skills_block
from agentenv.agent.tools import Tool
from agentenv.sandbox.protocol import Sandbox
from agentenv.tasks import Task


@dataclass(frozen=True)
class Offer:
    """The tools the model is shown (the task's own, then its MCP servers') and the skills
    block said after each instruction (``""`` without skills)."""

    tools: tuple[Tool, ...]
    skills: str

    def told(self, instruction: str) -> str:
        """``instruction`` as the model is given it: the skills block after it."""
        return instruction + self.skills


async def skills_of(task: Task, sandbox: Sandbox) -> str:
    """The block naming the skills in ``task``'s ``skills_dir`` in ``sandbox``; ``""``
    when it has none."""
    if not task.skills_dir:
        return ""
    return skills_block(await read_skills(sandbox, task.skills_dir))


@asynccontextmanager
async def offered(
    task: Task, sandbox: Sandbox, *, skills: str | None = None
) -> AsyncIterator[Offer]:
    """``async with offered(task, sandbox) as offer:`` what the model of an episode of
    ``task`` in ``sandbox`` is offered and told; the MCP servers' sessions (a stdio
    server's process) close when the block ends. ``skills``, if given, is the block an
    earlier opening computed (a resumed rollout's), not read from the sandbox again.
    Raises :class:`~agentenv.errors.SandboxError` when an MCP server cannot be reached."""
    if skills is None:
        skills = await skills_of(task, sandbox)
    async with mcp_tools(task.mcp_servers, sandbox) as served:
        yield Offer(tools=(*task.agent_tools, *served), skills=skills)


__all__ = ["Offer", "offered", "skills_of"]

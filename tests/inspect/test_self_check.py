"""Inspect AI's own sandbox self-check suite, in full, against the ``agentenv`` provider on
the real engine: its default sandbox (the offline base image, root, agentenv's security
defaults). One sandbox serves every check (module-scoped, under the function-scoped
``sandbox_env`` the suite asks for); nothing is marked xfail or skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util._sandbox.self_check import *  # noqa: F403

from agentenv.integrations.inspect import AgentenvSandboxEnvironment

pytestmark = pytest.mark.anyio

TASK = "agentenv-self-check"


@pytest.fixture(scope="module")
async def shared_env() -> AsyncIterator[SandboxEnvironment]:
    await AgentenvSandboxEnvironment.task_init(TASK, None)
    envs = await AgentenvSandboxEnvironment.sample_init(TASK, None, {})
    try:
        yield envs["default"]
    finally:
        await AgentenvSandboxEnvironment.sample_cleanup(TASK, None, envs, False)
        await AgentenvSandboxEnvironment.task_cleanup(TASK, None, True)


@pytest.fixture
async def sandbox_env(shared_env: SandboxEnvironment) -> SandboxEnvironment:
    return shared_env

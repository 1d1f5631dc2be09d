"""Which code scores which check kind: each file of :mod:`agentenv.verify.kinds` registers
its scorer under its ``kind``, and :func:`score_check` dispatches on it, so adding a kind is
adding a file. A kind that is declared but has no scorer is :class:`NoScorer`, naming it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import CheckBase, Run, result
from agentenv.verify.score import CheckResult, Score

Scored = tuple[CheckResult, list[CheckResult]]
"""A check's result and its leaf checks' results (itself, unless a composite; a swebench
check's two lists)."""
Scorer = Callable[[Run, Any], Awaitable[Scored]]
"""Scores one check of its kind in a checker sandbox."""
LeafScorer = Callable[[Run, Any], Awaitable[CheckResult]]
"""Scores one leaf check, on a workspace laid down afresh for it."""
AgentGrader = Callable[[Sandbox, Path, Any, str], Awaitable[Score]]
"""Scores a check in the agent's own sandbox once it is done: (sandbox, the task's
hidden tests, check, workdir)."""

SCORERS: dict[str, Scorer] = {}
"""Each check kind → its scorer in a checker sandbox."""
IN_AGENT_SANDBOX: dict[str, AgentGrader] = {}
"""Each check kind graded in the agent's own sandbox (not a checker sandbox) → its grader."""

_S = TypeVar("_S", bound=Scorer)
_L = TypeVar("_L", bound=LeafScorer)
_G = TypeVar("_G", bound=AgentGrader)


class NoScorer(LookupError):
    """A check kind was declared but nothing scores it where it was asked to be scored."""

    def __init__(self, kind: str, where: str = "in a checker sandbox") -> None:
        super().__init__(f"no scorer for the check kind {kind!r} {where}")
        self.kind = kind


def scorer(kind: str) -> Callable[[_S], _S]:
    """Register the decorated function as the scorer of ``kind``."""

    def register(fn: _S) -> _S:
        SCORERS[kind] = fn
        return fn

    return register


def leaf_scorer(kind: str) -> Callable[[_L], _L]:
    """Register the decorated function as the scorer of the leaf check ``kind``: the
    workspace is laid down afresh before it, and a failure to parse what the sandbox
    produced is a failed check, never an exception upward."""

    def register(fn: _L) -> _L:
        async def scored(run: Run, check: Any) -> Scored:
            await run.before_leaf()
            try:
                one = await fn(run, check)
            except (SandboxError, OSError):
                raise
            except Exception as e:  # parsing what the sandbox produced
                detail = f"unreadable output: {type(e).__name__}: {e}"
                one = result(check, check.kind, 0.0, detail)
            return one, [one]

        SCORERS[kind] = scored
        return fn

    return register


def in_agent_sandbox(kind: str) -> Callable[[_G], _G]:
    """Register the decorated function as the grader of ``kind`` in the agent's own
    sandbox."""

    def register(fn: _G) -> _G:
        IN_AGENT_SANDBOX[kind] = fn
        return fn

    return register


async def score_check(run: Run, check: CheckBase) -> Scored:
    """Score ``check`` with its kind's scorer; :class:`NoScorer` if its kind has none."""
    kind = str(getattr(check, "kind", type(check).__name__))
    found = SCORERS.get(kind)
    if found is None:
        raise NoScorer(kind)
    return await found(run, check)

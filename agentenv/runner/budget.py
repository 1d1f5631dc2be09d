"""A job's budget in dollars: once what the job has spent reaches the cap, no new item (an
episode, a repo) starts; the ones already running finish, so the job can end above the cap
by what they spend. The cap is on the whole job, earlier runs included: a job stopped by
its budget resumes with a higher cap and runs only what is left.

A job makes one :class:`Budget` with what its folder already spent, asks :meth:`Budget.admit`
right before starting each item, and calls :meth:`Budget.spend` as each one finishes. What
an item spent is counted by :class:`Metered` as the model answers, so an attempt that fails
after paying for turns (its sandbox lost, say) still counts.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from agentenv.agent.trajectory import Spend
from agentenv.model.types import ChatModel, Completion, StreamEvent

R = TypeVar("R", bound=Spend)


def with_earlier_spend(result: R, earlier: R | None) -> R:
    """``result`` of an item run again (an episode, a repo), with the spend of its earlier
    runs added (that line carries theirs in turn): an item's line says what it cost the job
    in all."""
    if earlier is None:
        return result
    fields = Spend.model_fields
    return result.model_copy(update={f: getattr(result, f) + getattr(earlier, f) for f in fields})


class Budget:
    """Dollars a job may spend (``max_usd``; ``None``: no cap) and what it has spent."""

    def __init__(self, max_usd: float | None = None, *, spent_usd: float = 0.0):
        if max_usd is not None and not (max_usd >= 0 and math.isfinite(max_usd)):
            raise ValueError(f"a budget must be a number of dollars >= 0, not {max_usd!r}")
        self.max_usd = max_usd
        self.spent_usd = spent_usd
        self.refused = 0  # items not started because the budget was spent

    def spend(self, usd: float) -> None:
        """Count what a finished item cost."""
        self.spent_usd += usd

    @property
    def exhausted(self) -> bool:
        """Whether the cap is reached: no new item may start."""
        return self.max_usd is not None and self.spent_usd >= self.max_usd

    @property
    def stopped(self) -> bool:
        """Whether the budget kept at least one item from starting."""
        return self.refused > 0

    async def admit(self) -> bool:
        """Call right before starting an item: ``True`` to start it, ``False`` (counted in
        ``refused``) once the budget is spent. Yields to the event loop first, so that the
        spend of an item that has just finished is counted before the decision."""
        await anyio.lowlevel.checkpoint()
        if self.exhausted:
            self.refused += 1
            return False
        return True

    def describe(self) -> str:
        """One line for a person: what was spent of the cap, and what did not start."""
        cap = "no cap" if self.max_usd is None else f"the ${self.max_usd:.4f} budget"
        line = f"spent ${self.spent_usd:.4f} of {cap}"
        if self.refused:
            line += f"; {self.refused} not started"
        return line


class Metered:
    """``model``, with the tokens and dollars of each completion added to ``into`` as it
    arrives: what an item paid for, whatever becomes of its trajectory."""

    def __init__(self, model: ChatModel, into: Spend):
        self.model = model
        self.into = into

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: Callable[[StreamEvent], Awaitable[None] | None] | None = None,
    ) -> Completion:
        """One assistant turn of ``model``, counted."""
        done = await self.model.complete(messages, tools, on_event=on_event)
        self.into.count(done)
        return done


__all__ = ["Budget", "Metered"]

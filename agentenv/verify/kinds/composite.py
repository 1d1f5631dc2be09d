"""The ``composite`` check: checks combined by ``all``, ``any`` or ``weighted``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from agentenv.verify.base import CheckBase, Run, result
from agentenv.verify.registry import Scored, score_check, scorer

if TYPE_CHECKING:
    from agentenv.verify.kinds import Check


class CompositeCheck(CheckBase):
    """Checks combined: ``all`` (1 only if every one passes), ``any``, or ``weighted`` (the
    weighted mean of their scores: partial credit)."""

    kind: Literal["composite"]
    mode: Literal["all", "any", "weighted"] = "all"
    checks: list[Check]

    def kept(self) -> list[str]:
        """What its parts keep as it was before the agent."""
        return [name for part in self.checks for name in part.kept()]


def leaf_checks(check: Check) -> list[Check]:
    """The checks a check is made of (itself, unless it is a composite), at any depth."""
    if isinstance(check, CompositeCheck):
        return [leaf for c in check.checks for leaf in leaf_checks(c)]
    return [check]


@scorer("composite")
async def _composite(run: Run, check: CompositeCheck) -> Scored:
    scored = [await score_check(run, c) for c in check.checks]
    parts = [p for p, _ in scored]
    leaves = [leaf for _, sub in scored for leaf in sub]
    weights = [c.weight for c in check.checks]
    if check.mode == "all":
        score = 1.0 if all(p.passed for p in parts) else 0.0
    elif check.mode == "any":
        score = 1.0 if any(p.passed for p in parts) else 0.0
    else:
        total = sum(weights) or 1.0
        score = sum(w * p.score for w, p in zip(weights, parts, strict=True)) / total
    passed_n = sum(p.passed for p in parts)
    out = result(check, f"{check.mode} of {len(parts)}", score, f"{passed_n}/{len(parts)} passed")
    return out, leaves

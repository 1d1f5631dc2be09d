"""The ``command`` check: a command, run in the workdir, passes on exit 0."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentenv.verify.base import AS_AGENT, CheckBase, Run, result
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult


class CommandCheck(CheckBase):
    """Passes when ``command`` exits 0 (run by bash in the workdir, hidden tests in
    ``/agentenv/tests``). With ``user = "checker"`` (the default) it runs as root and must
    run the agent's programs through ``$AS_AGENT`` (e.g. ``$AS_AGENT ./prog < in``), which
    drops to the agent's user, who cannot read ``/agentenv``; with ``user = "agent"`` the
    whole command runs as the agent's user (no hidden files needed: a repo's own tests).
    Exit 126/127 (not runnable) is a verifier error, so a check script that runs the agent's
    programs should exit 1 when those are missing; a timeout is a failure (the agent's
    program hung)."""

    kind: Literal["command"]
    command: str
    timeout_s: float = Field(300, gt=0)
    user: Literal["checker", "agent"] = "checker"


@leaf_scorer("command")
async def _command(run: Run, check: CommandCheck) -> CheckResult:
    name = f"command {check.command[:60]}"
    ws = run.ws
    tail_chars = 4000 if check.user == "agent" else 1000  # a repo's test summary is at the end
    env = {"AS_AGENT": AS_AGENT, "AGENT_USER": ws.agent_user, "WORKDIR": ws.workdir}
    as_agent = check.user == "agent"
    if as_agent:
        env["HOME"] = "/tmp"
    r = await run.sandbox.exec(
        check.command,
        timeout=check.timeout_s,
        cwd=ws.workdir,
        env=env,
        user=ws.agent_user if as_agent else None,
    )
    await run.stop_agent()
    tail = (r.stdout + r.stderr).strip()[-tail_chars:]
    if r.timed_out:  # the agent's program hung under the check: a failure, not a crash
        return result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    if r.exit_code in (126, 127):
        return result(check, name, 0.0, f"could not run (exit {r.exit_code}): {tail}", error=True)
    one = result(check, name, 1.0 if r.exit_code == 0 else 0.0, f"exit {r.exit_code}: {tail}")
    return one.model_copy(update={"exit_code": r.exit_code, "duration_s": r.duration_s})

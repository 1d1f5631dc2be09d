"""What every check kind shares: where things are in a checker sandbox, the base of the
check models, the :class:`Workspace` being verified, the :class:`Run` that lays it down
afresh before each leaf check, and the host-side readers (capped, depth-checked) of what a
sandbox produced."""

from __future__ import annotations

import functools
import inspect
import json
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentenv._resources import checkers_dir
from agentenv.archive import Archive
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.score import CheckResult

ROOT = "/agentenv"  # hidden tests, checkers and their output; never visible during the episode
TESTS = f"{ROOT}/tests"
CHECKERS = f"{ROOT}/verifiers"
OUT = f"{ROOT}/out"
ORIGINAL = f"{ROOT}/original"  # workdir files as they were before the agent (swebench)
CHECKERS_DIR = checkers_dir()  # the checker programs, from the package or the checkout
AGENT_USER = "1000:1000"
"""The agent's user (``uid:gid``) unless a task asks for root."""
AS_AGENT = f"python3 -I {CHECKERS}/as_agent.py"
"""How a check script runs one of the agent's programs: as the agent's user, no privileges."""
CHECKER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What the checker sandbox's root may do: lay out files, and drop to the agent's user."""
MAX_REPORT = 8 << 20  # bytes of a report (JUnit, JSON, a file) the host will parse
MAX_DEPTH = 64  # nesting a JSON value may have
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


@functools.cache
def stop_agent_source() -> str:
    """``stop_agent.py``'s source, run as ``python3 -I -c`` with the host's copy: what stops
    the agent never comes from a file in the sandbox (a check could have changed it). Read
    when first needed, not when agentenv is imported."""
    return (CHECKERS_DIR / "stop_agent.py").read_text()


class CheckBase(BaseModel):
    """The fields every check kind has: an optional ``name`` and its ``weight`` in a
    weighted composite."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    weight: float = Field(1.0, ge=0)

    def kept(self) -> list[str]:
        """The workdir's files the check takes as they were before the agent (none, unless
        the kind says otherwise)."""
        return []


class Workspace(BaseModel):
    """What a checker sandbox verifies: the agent's final workdir as a tar archive whose
    entries are relative to the workdir (made safe by the episode runner), and the user the
    agent ran as."""

    archive: Archive  # validates from bytes too
    workdir: str = "/workspace"
    agent_user: str = AGENT_USER


class Run:
    """One verification in a checker sandbox: lays out ``/agentenv`` (``hidden``: a tar of
    the checkers and hidden tests, see :func:`agentenv.verify.run.hidden_files`) and the
    workspace afresh before each leaf check, so no check sees what an earlier one's agent
    code left, nor runs a checker or hidden test an earlier check could have changed; and
    stops the agent's processes after each."""

    def __init__(
        self,
        sandbox: Sandbox,
        workspace: Workspace,
        tests: Path | None = None,
        prepared: Archive | None = None,
        hidden: Archive | bytes | None = None,
    ):
        self._box = sandbox  # Run's own commands (root's: laying out, stopping, reading)
        # the checker sandbox as the check kinds use it: any use may run the agent's code
        self.sandbox: Sandbox = _Watched(sandbox, self)
        self.ws = workspace
        self.tests = tests  # the task's hidden tests on the host (an outputs check's cases)
        self.prepared = prepared  # the workdir before the agent, when known (a tar)
        self.hidden = hidden  # /agentenv as a tar, laid out anew before each leaf check
        self.leaves = 0
        # What Run knows of the sandbox since its own last command, every other use of it
        # going through ``self.sandbox`` (which calls touched() first). ``_stopped``: a
        # stop found no process of the agent's user left and nothing has run since, so
        # none can exist (the agent's user starts only what a command starts; a killed
        # process does not come back). ``_fresh``: besides, /agentenv and the workspace
        # are as laid out (since then only Run's own root readers ran, which write
        # nothing). Each lets a repeated stop or layout be skipped: it would find and
        # change nothing. ``_pending``: a stop asked for (stop_agent) and not yet run; it
        # runs before anything else is done in the sandbox (settle), in the next layout's
        # own command when that comes first: one command fewer between two leaf checks.
        self._stopped = False
        self._fresh = False
        self._pending = False

    def touched(self) -> None:
        """The sandbox is used by a check: anything may run in it from now on."""
        self._stopped = self._fresh = False

    async def lay_out(self) -> None:
        """The agent's processes stopped, ``/agentenv`` laid out anew (when ``hidden`` is
        given), and the workspace as the agent handed it in, with nothing it left in /tmp
        or /dev/shm (the only other places the agent's user can write): one command and
        one upload each. Nothing of ``/agentenv`` runs before it is laid out anew."""
        stop = self.stops() and not self._stopped
        self._stopped = self._fresh = self._pending = False  # until all of it is done
        steps = [stop_agent_command(self.ws.agent_user)] if stop else []
        if self.hidden is not None:
            steps.append(f"mkdir -p {ROOT} && {clear(ROOT)} && chmod 0755 {ROOT}")
        steps.append(empty_workspace(self.ws))
        await run_checked(self._box, " && ".join(steps), timeout=120)
        if self.hidden is not None:
            await self._box.upload_tar(self.hidden, ROOT)
        await self._box.upload_tar(self.ws.archive, self.ws.workdir)
        self._stopped = self._fresh = True

    def stops(self) -> bool:
        """Whether the agent's processes can be told from the checker's (not for a root
        agent: its leftovers cannot be told from ours; each check is fresh)."""
        return self.ws.agent_user.split(":")[0] not in ("0", "root")

    async def stop_agent(self) -> None:
        """Kill every process of the agent's user, before anything else is done in the
        sandbox (by a check, by Run itself, or the verification's end: :meth:`settle`);
        raise there if one survives (fails loudly)."""
        self._pending = self.stops() and not self._stopped

    async def settle(self) -> None:
        """Run the stop asked for, if one is pending (see :meth:`stop_agent`)."""
        if not self._pending:
            return
        self._pending = False
        r = await self._box.exec(
            ["python3", "-I", "-c", stop_agent_source(), self.ws.agent_user], timeout=60
        )
        if not r.ok:
            raise SandboxError(f"cannot stop the agent's processes: {(r.stdout + r.stderr)[-500:]}")
        self._stopped = True

    async def read_file(self, path: str) -> bytes | None:
        """A file a check reads (:func:`read_capped`): relative to the workdir unless
        absolute, and when it is in the workdir, never through a link leading out of it."""
        full = in_workdir(self.ws.workdir, path)
        wd = self.ws.workdir.rstrip("/")
        ours = full == wd or full.startswith(wd + "/")
        # root's own reader (read_capped.py, from /agentenv as laid out): it starts nothing
        # as the agent's user and writes nothing, so the sandbox stays as it was
        await self.settle()  # nothing of the agent's changes the file while it is read
        return await read_capped(self._box, full, inside=self.ws.workdir if ours else None)

    async def before_leaf(self) -> None:
        """Before each leaf check but the first (laid out by :func:`verify`): the agent's
        processes stopped and everything laid out anew, unless nothing has run since the
        last layout but Run's own readers (then there is nothing to undo: see __init__)."""
        self.leaves += 1
        if self.leaves > 1 and not self._fresh:
            await self.lay_out()


class _Watched:
    """A checker sandbox as :class:`Run` hands it to the check kinds: the sandbox itself,
    except that every attribute taken from it, and every call of one, first tells the run
    it was touched (:meth:`Run.touched`), so the run never takes it to be as it left it;
    and what a call awaits (every operation in the sandbox is awaited) starts only once a
    pending stop has run (:meth:`Run.settle`)."""

    def __init__(self, box: Sandbox, run: Run):
        self._box = box
        self._run = run

    def __getattr__(self, name: str) -> Any:
        self._run.touched()
        value = getattr(self._box, name)
        if not callable(value):
            return value
        run = self._run

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            run.touched()  # again: a method may be kept and called later
            result = value(*args, **kwargs)
            if not inspect.isawaitable(result):
                return result

            async def after_the_stop() -> Any:
                await run.settle()
                run.touched()
                return await result

            return after_the_stop()

        return call


def stop_agent_command(agent_user: str) -> str:
    """A shell command killing every process of ``agent_user`` (see :func:`stop_agent_source`)."""
    return f"python3 -I -c {shlex.quote(stop_agent_source())} {shlex.quote(agent_user)}"


def clear(*folders: str) -> str:
    """A command emptying ``folders`` (which may be mount points, so not removed)."""
    quoted = " ".join(shlex.quote(f) for f in folders)
    return f"find {quoted} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +"


def empty_workspace(ws: Workspace) -> str:
    """A command leaving an empty workdir owned by the agent, and empty /tmp and /dev/shm."""
    wd, user = shlex.quote(ws.workdir), shlex.quote(ws.agent_user)
    return (
        f"mkdir -p {wd} && {clear(ws.workdir, '/tmp')} && "
        f"{{ [ ! -d /dev/shm ] || {clear('/dev/shm')}; }} && chown {user} {wd} && chmod 0755 {wd}"
    )


async def run_checked(
    sandbox: Sandbox, cmd: str, *, timeout: float, cwd: str | None = None, check: bool = True
) -> Any:
    """Run a setup command of the checker's; ``SandboxError`` when it fails (unless not
    ``check``)."""
    result = await sandbox.exec(cmd, timeout=timeout, cwd=cwd)
    if check and not result.ok:
        raise SandboxError(f"verifier setup failed: {cmd!r}: {result.stderr.strip()[-500:]}")
    return result


def result(
    check: CheckBase, default: str, score: float, detail: str = "", *, error: bool = False
) -> CheckResult:
    """A check's result: named by the check, else ``default``; passed on full marks."""
    return CheckResult(
        name=check.name or default,
        score=score,
        passed=score >= 1.0 and not error,
        detail=detail,
        error=error,
    )


async def read_capped(
    sandbox: Sandbox, path: str, limit: int = MAX_REPORT, *, inside: str | None = None
) -> bytes | None:
    """A file's bytes, or ``None`` when it is missing, unreadable, not a regular file or
    larger than ``limit`` (nothing the agent made can make the host read without bound).
    With ``inside`` (the workdir, for a file the agent made), also ``None`` when the path,
    its links followed, leads out of that folder: a link the agent left never makes the
    checker read a hidden test or a system file."""
    r = await sandbox.exec(
        ["python3", "-I", f"{CHECKERS}/read_capped.py", path, str(limit)]
        + ([inside] if inside is not None else []),
        timeout=60,
        max_output=limit + 1024,
    )
    if r.exit_code != 0 or r.truncated:
        return None
    return r.stdout_bytes


def in_workdir(workdir: str, path: str) -> str:
    """``path`` as given when absolute, else relative to the workdir."""
    return path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"


def is_subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` contains ``expected``: dict keys recursively, lists element-wise
    (same length), anything else equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and is_subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual  # true is not 1
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(is_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def load_json(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON made in a sandbox: ``ValueError`` when it is not JSON or nests deeper
    than ``max_depth`` (checked before parsing, so no recursion limit is ever reached)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > max_depth:
                raise ValueError(f"nested deeper than {max_depth}")
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return json.loads(data)

"""Policies other than a live model, each a :class:`~agentenv.model.types.ChatModel` so that
one loop drives them all (pausing, tools, limits and the trajectory work the same):

- :func:`oracle`: runs the task's reference ``solution.sh`` and submits (no model);
- :func:`command`: runs one shell command (a codemod) and submits;
- :func:`replay`: replays a recorded trajectory's turns, tool calls and all;
- :func:`null`: does nothing, which proves a verifier can fail.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import tarfile
from typing import Any

from agentenv.agent.loop import Trajectory
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel, Completion, Route, ToolCall
from agentenv.sandbox.protocol import Sandbox

SOLUTION_PATH = "/tmp/agentenv-solution.sh"
SOLUTION_DIR = "/tmp/agentenv-solution"  # a task's solution/ folder, for its script
HARBOR_SOLUTION_DIR = "/solution"  # where Harbor's oracle puts solution/ and runs solve.sh


class ScriptedModel:
    """Answers with fixed completions in order; once they run out, with a turn that calls
    no tool (so the episode ends with ``no_tool_calls``). Costs nothing."""

    def __init__(
        self,
        completions: list[Completion],
        name: str,
        *,
        files: dict[str, tuple[str, int]] | None = None,
        laid_out: list[Completion] | None = None,
    ):
        self.completions = completions
        self.name = name
        self._next = 0
        # absolute path → (text, mode): put in place by root before the first turn (see
        # lay_out), after which ``laid_out`` (the turns without writing them) are played
        self.files = files or {}
        self.laid_out = laid_out

    async def lay_out(self, sandbox: Sandbox) -> None:
        """Put :attr:`files` into ``sandbox`` through the engine's archive upload, owned by
        root (the sandbox's user may not write there: an image with a ``USER`` of its
        own), and play the turns that do not write them. Without this (a driver that
        does not call it) the turns write them through tool calls, as the sandbox's user."""
        if not self.files or self.laid_out is None or self._next:
            return
        await sandbox.upload_tar(_root_tar(self.files), "/")
        self.completions = self.laid_out

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """The next scripted turn."""
        if self._next < len(self.completions):
            done = self.completions[self._next].model_copy(deep=True)
            self._next += 1
        else:
            done = Completion(content=f"({self.name}: nothing left to do)", finish_reason="stop")
        done.route = Route(endpoint=self.name, reason=f"{self.name} policy")
        done.message_form = "k3"  # the history looks as a K3 agent's would
        return done


class StepsScript(ScriptedModel):
    """One scripted model over a multi-step task's steps, each step's its own
    :class:`ScriptedModel` (an oracle's, say): their turns in order, one step's after the
    other's. Each :meth:`lay_out` (the step machinery calls it as each step begins) puts the
    next step's files in place by root and plays that step's turns that do not write them;
    a step not laid out (a driver that does not call it) writes them through tool calls."""

    def __init__(self, steps: list[ScriptedModel], name: str):
        super().__init__([c for step in steps for c in step.completions], name)
        self.steps = steps
        self._laid = 0  # how many steps lay_out has reached

    async def lay_out(self, sandbox: Sandbox) -> None:
        """Lay out the next step's files (see the class), once its turns are next."""
        if self._laid >= len(self.steps):
            return
        step, first = (
            self.steps[self._laid],
            sum(len(s.completions) for s in self.steps[: self._laid]),
        )
        self._laid += 1
        if not step.files or step.laid_out is None or self._next != first:
            return  # nothing to lay out, or its turns are not next: written as they say
        await sandbox.upload_tar(_root_tar(step.files), "/")
        end = first + len(step.completions)
        self.completions = [*self.completions[:first], *step.laid_out, *self.completions[end:]]
        step.completions = step.laid_out  # the offsets of the later steps follow


async def lay_out(model: ChatModel, sandbox: Sandbox) -> None:
    """Before an episode: a scripted policy's files put in place by root (see
    :meth:`ScriptedModel.lay_out`); nothing for any other model."""
    if isinstance(model, ScriptedModel):
        await model.lay_out(sandbox)


def _root_tar(files: dict[str, tuple[str, int]]) -> bytes:
    """A tar, to extract at ``/``, of ``files`` and their folders, all root's (folders
    0755)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders: set[str] = set()
        for path in files:
            parent = posixpath.dirname(path.strip("/"))
            while parent:
                folders.add(parent)
                parent = posixpath.dirname(parent)
        for folder in sorted(folders):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, (text, mode) in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(path.strip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _call(index: int, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"functions.{name}:{index}", name=name, arguments=json.dumps(arguments))


def oracle(
    solution: str,
    *,
    timeout_s: float = 1800,
    files: dict[str, str] | None = None,
    solution_dir: str | None = None,
    env: dict[str, str] | None = None,
) -> ScriptedModel:
    """A policy that writes ``solution`` (the text of a task's reference script) into the
    sandbox, runs it with bash in the working directory, and submits. ``files`` (relative
    path → text: the rest of a task's ``solution/`` folder) are written next to it first;
    the script finds them in ``$SOLUTION_DIR``. With ``solution_dir`` (a Harbor task's
    :data:`HARBOR_SOLUTION_DIR`) the folder is laid out there, the script as ``solve.sh``
    beside its files, as Harbor's oracle uploads ``solution/`` and runs ``solve.sh``.
    ``env`` (a Harbor task's ``[solution].env``) is the script's environment on top of the
    sandbox's, for that command only (its values show in the trajectory's command)."""
    folder = solution_dir or SOLUTION_DIR
    script = f"{solution_dir}/solve.sh" if solution_dir else SOLUTION_PATH
    files = {f"{folder}/{name}": text for name, text in sorted((files or {}).items())}
    assigned = [
        f"{name}={value}" for name, value in {**(env or {}), "SOLUTION_DIR": folder}.items()
    ]
    run = shlex.join(["env", *assigned, "bash", script])

    def turn(written: dict[str, str]) -> Completion:
        writes = [
            _call(i, "write_file", path=path, content=text)
            for i, (path, text) in enumerate(written.items())
        ]
        n = len(writes)
        return Completion(
            content="Running the reference solution.",
            finish_reason="tool_calls",
            tool_calls=[
                *writes,
                _call(n, "bash", command=run, timeout=timeout_s),
                _call(n + 1, "submit", summary="reference solution"),
            ],
        )

    written = {**files, script: solution}
    if solution_dir is None:
        return ScriptedModel([turn(written)], "oracle")
    # Harbor's oracle: solution/ uploaded to /solution as root (solve.sh executable), run
    # as the sandbox's user; laid out so by a driver that calls lay_out (run_task)
    as_root = {path: (text, 0o755 if path == script else 0o644) for path, text in written.items()}
    return ScriptedModel([turn(written)], "oracle", files=as_root, laid_out=[turn({})])


def command(cmd: str, *, timeout_s: float = 1800) -> ScriptedModel:
    """A policy that runs one shell command (a deterministic codemod) and submits."""
    turn = Completion(
        content=f"Running: {cmd}",
        finish_reason="tool_calls",
        tool_calls=[
            _call(0, "bash", command=cmd, timeout=timeout_s),
            _call(1, "submit", summary="codemod applied"),
        ],
    )
    return ScriptedModel([turn], "command")


def replay(trajectory: Trajectory) -> ScriptedModel:
    """A policy that makes the recorded trajectory's turns again, in order (reasoning,
    content and tool calls as recorded; usage and cost zero: nothing is paid twice)."""
    turns = [
        Completion(
            content=t.completion.content,
            reasoning_content=t.completion.reasoning_content,
            tool_calls=t.completion.tool_calls,
            finish_reason=t.completion.finish_reason,
        )
        for t in trajectory.turns
    ]
    return ScriptedModel(turns, "replay")


def null() -> ScriptedModel:
    """A policy that does nothing and stops at once."""
    return ScriptedModel([], "null")


__all__ = ["ScriptedModel", "StepsScript", "command", "lay_out", "null", "oracle", "replay"]

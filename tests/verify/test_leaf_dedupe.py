"""A verification skips a stop of the agent's processes, or a fresh layout before a leaf
check, only when nothing has run in the checker sandbox since the last one but agentenv's
own root commands: fewer commands for the same verdict, and still nothing an earlier leaf's
agent code left (a file, a process rewriting one) reaches a later leaf."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter

from agentenv.archive import Archive
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox
from agentenv.verify import CHECKER_CAPS, Check, Workspace, verify
from agentenv.verify.base import Run
from agentenv.verify.run import hidden_files

pytestmark = pytest.mark.anyio
CHECK: TypeAdapter[Check] = TypeAdapter(Check)


@pytest.fixture(scope="module")
async def checker() -> AsyncIterator[DockerSandbox]:
    spec = SandboxSpec(user="0:0", cap_add=CHECKER_CAPS)
    async with await DockerSandbox.create(spec) as sandbox:
        yield sandbox


class Counted:
    """A sandbox whose execs are recorded (their command lines), for counting."""

    def __init__(self, box: DockerSandbox):
        self._box = box
        self.commands: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._box, name)

    async def exec(self, cmd: Any, **kwargs: Any) -> Any:
        self.commands.append(" ".join(cmd) if isinstance(cmd, list) else cmd)
        return await self._box.exec(cmd, **kwargs)

    def stops(self) -> int:
        return sum("refusing to kill root" in c for c in self.commands)

    def layouts(self) -> int:
        return sum("-exec rm -rf" in c for c in self.commands)


def workspace() -> Workspace:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("a.txt", b"the agent's file\n"), ("report.json", b'{"ok": 1}')):
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid = len(data), 1000, 1000
            tar.addfile(info, io.BytesIO(data))
    return Workspace(archive=Archive.from_bytes(buf.getvalue()))


def composite(*checks: dict[str, Any]) -> Check:
    return CHECK.validate_python({"kind": "composite", "mode": "weighted", "checks": checks})


JSON_OK = {"kind": "json", "path": "report.json", "subset": {"ok": 1}}


async def test_read_only_leaves_share_one_layout_and_one_stop(checker: DockerSandbox) -> None:
    box = Counted(checker)
    check = composite(*(dict(JSON_OK, name=f"json {i}") for i in range(3)))
    score = await verify(box, check, workspace())  # type: ignore[arg-type]
    assert score.reward == 1.0, score
    # one layout (its stop in the same command), no stop on its own: the json checks ran
    # only root's reader, which starts nothing of the agent's and writes nothing
    assert (box.layouts(), box.stops()) == (1, 1), box.commands


async def test_a_stop_runs_with_the_next_layout_and_never_twice(checker: DockerSandbox) -> None:
    box = Counted(checker)
    agent = {"kind": "command", "command": "true", "user": "agent"}
    check = composite(agent, dict(agent, name="again"))
    score = await verify(box, check, workspace())  # type: ignore[arg-type]
    assert score.reward == 1.0, score
    # a stop in each layout's command and one at the end: the stop the first check asks
    # for runs in the next layout's command, not in one of its own (5 commands, not 6)
    assert (box.layouts(), box.stops(), len(box.commands)) == (2, 3, 5), box.commands


# the agent's code in one leaf: rewrites the report, plants files, leaves a process that
# keeps rewriting the report (and one that stops itself)
PLANT = (
    "echo '{\"ok\": 2}' > report.json; touch planted /tmp/planted; "
    "(while :; do echo '{\"ok\": 2}' > report.json; sleep 0.02; done) </dev/null >/dev/null "
    "2>&1 & (kill -STOP $$BASHPID; touch late) </dev/null >/dev/null 2>&1 & sleep 0.2; exit 0"
)
CLEAN = (
    "sleep 0.3; [ ! -e planted ] && [ ! -e late ] && [ ! -e /tmp/planted ] && "
    '[ "$(cat report.json)" = \'{"ok": 1}\' ] && '
    "python3 -c \"import os,sys; sys.exit(any(os.stat('/proc/'+p).st_uid == 1000 "
    "for p in os.listdir('/proc') if p.isdigit()))\""
)


async def test_nothing_of_an_earlier_leaf_reaches_a_later_one(checker: DockerSandbox) -> None:
    box = Counted(checker)
    check = composite(
        dict(JSON_OK, name="before"),
        {"kind": "command", "command": PLANT, "user": "agent", "weight": 0, "name": "plant"},
        dict(JSON_OK, name="after"),
        dict(JSON_OK, name="after, again"),
        {"kind": "command", "command": CLEAN, "name": "clean"},
    )
    score = await verify(box, check, workspace())  # type: ignore[arg-type]
    details = {c.name: c.detail for c in score.checks}
    assert score.error is None, details
    assert score.reward == 1.0, json.dumps(details, indent=1)
    # laid out before "before" and "after" (the agent's code ran), not before "after,
    # again" nor "clean": only root's reader ran since "after" was laid out
    assert box.layouts() == 2, box.commands


async def test_a_stop_asked_for_runs_before_anything_else_in_the_sandbox(
    checker: DockerSandbox,
) -> None:
    # a check's agent code leaves a process rewriting the report; the check asks for a stop
    # and then reads the report (as the pytest kinds do) or runs something as root: the
    # stop has run first, whichever way the sandbox is next used
    box = Counted(checker)
    run = Run(box, workspace(), hidden=hidden_files(None))  # type: ignore[arg-type]
    await run.lay_out()
    rewrite = (  # a whole report at every moment, a new one every few ms
        "(while :; do echo $RANDOM$RANDOM > r.tmp; mv r.tmp report.json; done) "
        "</dev/null >/dev/null 2>&1 &"
    )
    await run.sandbox.exec(rewrite, cwd="/workspace", user="1000:1000")
    await run.stop_agent()
    first = await run.read_file("report.json")
    assert first is not None and first.strip().isdigit(), first
    await anyio.sleep(0.3)
    assert await run.read_file("report.json") == first
    await run.sandbox.exec(rewrite, cwd="/workspace", user="1000:1000")
    await run.stop_agent()
    count = "ls /proc | grep -c '^[0-9]' >/dev/null; find /proc -maxdepth 1 -user 1000 | wc -l"
    r = await run.sandbox.exec(count)
    assert r.stdout.strip() == "0", r
    await run.stop_agent()  # after root's count: that may have run anything
    await run.settle()
    await run.stop_agent()
    await run.settle()  # nothing has run since: no command
    # the layout's, one before the first read, one before the count, one after it
    assert box.stops() == 4, box.commands

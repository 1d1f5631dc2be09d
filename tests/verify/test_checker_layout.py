"""The checker sandbox's ``/agentenv`` is laid out afresh before every leaf check, read-only to
every uid but root: a check that wrote into it (a root check script led by an agent's link,
say) changes nothing the next check runs or reads; and a file check never reads through a
link out of the workdir."""

from __future__ import annotations

import io
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentenv.archive import Archive
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox
from agentenv.verify import CHECKER_CAPS, Check, Workspace, verify

pytestmark = pytest.mark.anyio
CHECK: TypeAdapter[Check] = TypeAdapter(Check)


def check(**fields: Any) -> Check:
    return CHECK.validate_python(fields)


@pytest.fixture(scope="module")
async def checker() -> AsyncIterator[DockerSandbox]:
    spec = SandboxSpec(user="0:0", cap_add=CHECKER_CAPS)
    async with await DockerSandbox.create(spec) as sandbox:
        yield sandbox


def workspace(links: dict[str, str] | None = None) -> Workspace:
    """A workspace with ``a.txt`` and the symlinks ``links`` (name -> target), as no episode
    would hand one in (its links are not filtered): what a verifier must survive anyway."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"the agent's file\n"
        info = tarfile.TarInfo("a.txt")
        info.size, info.uid, info.gid = len(data), 1000, 1000
        tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname, link.uid, link.gid = tarfile.SYMTYPE, target, 1000, 1000
            tar.addfile(link)
    return Workspace(archive=Archive.from_bytes(buf.getvalue()))


async def test_each_leaf_check_gets_agentenv_afresh(checker: DockerSandbox, tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "check.sh").write_text("exit 0\n")
    # the first check, as root, does what a root check led by a link could: rewrites the
    # hidden test and a checker, plants a file, opens the tests to everyone
    tamper = (
        "echo 'exit 1' > /agentenv/tests/check.sh; echo 'raise SystemExit(0)' > "
        "/agentenv/verifiers/as_agent.py; touch /agentenv/tests/planted; "
        "chmod 0777 /agentenv/tests /agentenv/verifiers"
    )
    after = (
        "bash /agentenv/tests/check.sh && [ ! -e /agentenv/tests/planted ] && "
        '[ "$(stat -c %a /agentenv/tests)" = 700 ] && '
        '[ "$(stat -c %a /agentenv/verifiers)" = 755 ] && '
        '[ "$(stat -c %a /agentenv/out)" = 700 ] && '
        # the agent's user reads no hidden test and writes nothing in /agentenv
        "! $AS_AGENT cat /agentenv/tests/check.sh && "
        "! $AS_AGENT touch /agentenv/verifiers/x && "
        '[ "$($AS_AGENT id -u)" = 1000 ]'
    )
    composite = check(
        kind="composite",
        mode="weighted",
        checks=[
            {"kind": "command", "command": tamper, "weight": 0},
            {"kind": "command", "command": after, "name": "after"},
        ],
    )
    score = await verify(checker, composite, workspace(), tests=tests)
    assert score.error is None, score
    assert score.reward == 1.0, [(c.name, c.detail) for c in score.checks]


async def test_a_file_check_never_reads_through_a_link_out_of_the_workdir(
    checker: DockerSandbox,
) -> None:
    links = {"out.txt": "/etc/passwd", "in.txt": "a.txt", "up.txt": "../etc/passwd"}
    for name, want in (("out.txt", 0.0), ("up.txt", 0.0), ("in.txt", 1.0), ("a.txt", 1.0)):
        regex = "root:" if name != "in.txt" and name != "a.txt" else "agent's file"
        one = check(kind="file", path=name, regex=regex)
        score = await verify(checker, one, workspace(links))
        assert score.reward == want, (name, score)
    # a task's own absolute path outside the workdir is read as the task says
    system = check(kind="file", path="/etc/passwd", regex="root:")
    score = await verify(checker, system, workspace())
    assert score.reward == 1.0, score

"""A Harbor task's top-level ``artifacts`` and ``[[verifier.collect]]`` (both refused
before): once the agent is done the collect commands run (in main, or in a compose
service), then the artifacts and ``/logs/artifacts`` are copied from the agent's final
state into the job folder (``artifacts/<task>/<sample>/``) with a ``manifest.json``.
The tasks mirror real ones (Harbor's cookbook tasks that publish to ``/logs/artifacts``
and declare ``artifacts = [...]``; compose tasks whose collect hook dumps a service's
state), FROM the offline base image. The agent leaves a symlink to a secret of the
system in a declared folder: it is left out, never followed."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.runner import artifacts
from agentenv.sandbox.errors import ArchiveTooLarge
from agentenv.tasks import load_task
from agentenv.verify.kinds.harbor import HarborArtifact, HarborCheck
from tests.formats.test_harbor import TOML, harbor_task

pytestmark = pytest.mark.anyio

ARTIFACTS = """
artifacts = [
  "/app/out.txt",
  {{ source = "/app/res", exclude = ["*.log", "cache"] }},
  {{ source = "/app/out.txt", destination = "named/copy.txt" }},
{more}]
"""

SOLVE = """\
echo hello > /app/out.txt
mkdir -p /app/res/cache /logs/artifacts
echo kept > /app/res/a.txt; echo noisy > /app/res/run.log; echo big > /app/res/cache/x
ln -s /etc/shadow /app/res/secret
echo published > /logs/artifacts/note.txt
"""

TEST = """\
test "$(cat /app/out.txt)" = hello && r=1 || r=0
echo $r > /logs/verifier/reward.txt
"""

COLLECT = """
[[verifier.collect]]
command = "echo ran > /app/res/collected.txt"

[[verifier.collect]]
command = "echo failing >&2; exit 3"
"""

COMPOSE = """\
services:
  main:
    environment:
      X: "1"
  db:
    image: agentenv/base:bookworm
    command: ["sh", "-c", "echo rows > /tmp/state; while :; do sleep 1; done"]
"""

SIDE_COLLECT = """
[[verifier.collect]]
service = "db"
command = "cp /tmp/state /tmp/dump.txt"
"""


def _toml(more: str, collect: str) -> str:
    base = TOML.format(verifier_timeout=60.0, extra="")
    return ARTIFACTS.format(more=more) + base.replace("[verifier]\n", collect + "\n[verifier]\n")


def _tasks(root: Path) -> tuple[Path, Path]:
    plain = harbor_task(root, "arts", test=TEST, solve=SOLVE, toml=_toml("", COLLECT))
    side = '  { source = "/tmp/dump.txt", service = "db", destination = "db/dump.txt" },\n'
    composed = harbor_task(
        root, "arts-compose", test=TEST, solve=SOLVE, toml=_toml(side, SIDE_COLLECT)
    )
    (composed / "environment" / "docker-compose.yaml").write_text(COMPOSE)
    return plain, composed


@pytest.mark.no_docker
@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ('{ source = "/app/x", destination = "../../etc/cron.d/x" }', "artifacts[0].destination"),
        ('{ source = "/app/x", destination = "/etc/x" }', "artifacts[0].destination"),
        ('{ source = "/app/x", destination = "manifest.json" }', "artifacts[0].destination"),
        ('{ source = "/app/../etc/shadow" }', "artifacts[0].source"),
    ],
)
def test_a_destination_leaving_the_folder_is_refused_naming_the_field(
    tmp_path: Path, entry: str, field: str
) -> None:
    toml = f"artifacts = [{entry}]\n" + TOML.format(verifier_timeout=60.0, extra="")
    folder = harbor_task(tmp_path, "escape", test=TEST, toml=toml)
    with pytest.raises(TaskError, match=re.escape(f"{field}: ")):
        load_task(folder)


@pytest.mark.no_docker
def test_artifacts_and_collect_load(tmp_path: Path) -> None:
    plain, composed = _tasks(tmp_path)
    check = load_task(plain).verifier
    assert [a.exclude for a in check.artifacts] == [[], ["*.log", "cache"], []]  # type: ignore[union-attr]
    assert [c.command for c in check.collect][1].endswith("exit 3")  # type: ignore[union-attr]
    side = load_task(composed).verifier
    assert side.artifacts[-1].service == "db" and side.collect[0].service == "db"  # type: ignore[union-attr]


@pytest.mark.on_docker
def test_oracle_eval_writes_artifacts_to_the_job_folder(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    _tasks(tasks)
    job = tmp_path / "job"
    # on Docker whatever the suite's backend: one task is a compose task, which Podman refuses
    argv = [sys.executable, "-m", "agentenv", "--backend", "docker", "eval", str(tasks)]
    done = subprocess.run(
        [*argv, "--model", "oracle", "--out", str(job)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(x) for x in (job / "results.jsonl").read_text().splitlines()]
    assert {x["task_id"]: x["reward"] for x in lines} == {"arts": 1.0, "arts-compose": 1.0}, lines

    plain = job / "artifacts" / "arts" / "0"
    assert (plain / "app" / "out.txt").read_text() == "hello\n"
    assert (plain / "named" / "copy.txt").read_text() == "hello\n"
    assert (plain / "logs" / "artifacts" / "note.txt").read_text() == "published\n"
    res = plain / "app" / "res"
    assert (res / "a.txt").read_text() == "kept\n"
    assert (res / "collected.txt").read_text() == "ran\n"  # the collect command ran first
    assert not (res / "run.log").exists() and not (res / "cache").exists()  # exclude
    assert not (res / "secret").exists() and not (res / "secret").is_symlink()
    manifest = json.loads((plain / "manifest.json").read_text())
    by_dest = {e["destination"]: e for e in manifest["entries"]}
    assert by_dest["app/res"]["left_out"] == 1 and by_dest["app/res"]["type"] == "directory"
    failed = [c for c in manifest["collect"] if c.get("exit_code") == 3]
    assert failed and "failing" in failed[0]["stderr"]  # recorded, not fatal

    side = job / "artifacts" / "arts-compose" / "0"
    assert (side / "db" / "dump.txt").read_text() == "rows\n"  # from the service, after its hook
    assert (side / "app" / "out.txt").read_text() == "hello\n"

    from agentenv.view.site import build_site

    build_site(job, tmp_path / "site")
    page = (tmp_path / "site" / "episodes" / "arts--0.html").read_text()
    assert "<h2>artifacts</h2>" in page and "app/res/collected.txt" in page and "published" in page


class _Box:
    """A sandbox whose engine hands back a tar made by the test (what a hostile final
    state could put in one), within ``max_bytes`` as the engine's is."""

    def __init__(self, tars: dict[str, bytes]):
        self.tars = tars

    async def download_to(self, path: str, file: Path, *, max_bytes: int | None = None) -> None:
        if path not in self.tars:
            raise FileNotFoundError(path)
        data = self.tars[path]
        if max_bytes is not None and len(data) > max_bytes:
            raise ArchiveTooLarge(f"{path}: larger than {max_bytes}")
        Path(file).write_bytes(data)


def _tar(members: list[tuple[str, bytes | None, str | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.no_docker
async def test_hostile_tars_stay_inside_and_the_cap_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(artifacts, "MAX_BYTES", 64 << 10)
    check = HarborCheck(
        kind="harbor",
        artifacts=[
            HarborArtifact(source="/app/res"),
            HarborArtifact(source="/app/huge.bin"),
            HarborArtifact(source="/app/res/inner"),  # overlaps the one before: skipped
        ],
    )
    res = [
        ("res", None, None),
        ("res/ok.txt", b"fine", None),
        ("res/../../../escaped.txt", b"out", None),
        ("/abs.txt", b"out", None),
        ("res/link", None, "/etc/shadow"),
    ]
    box = _Box(
        {"/app/res": _tar(res), "/app/huge.bin": _tar([("huge.bin", b"x" * (1 << 20), None)])}
    )
    collecting = artifacts.Collecting(box, check)  # type: ignore[arg-type]
    archive = await artifacts.collect_paused(collecting)
    artifacts.write_artifacts(archive, tmp_path / "out")
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert found == ["out/app/res/ok.txt", "out/manifest.json"], found
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    status = {e["source"]: (e["status"], e["left_out"]) for e in manifest["entries"]}
    assert status == {
        "/logs/artifacts": ("missing", 0),
        "/app/res": ("ok", 3),
        "/app/huge.bin": ("too_large", 0),
        "/app/res/inner": ("skipped", 0),
    }, status

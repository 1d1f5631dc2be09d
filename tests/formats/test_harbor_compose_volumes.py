"""A compose task whose ``main`` mounts a named volume of the group (it was refused:
``services.main.volumes`` "is Harbor's to set for main"; Harbor merges the task's file over
its own, so main's volumes are mounted there). The task mirrors bencalvert04/harbor-tasks
``scheduler``: a sidecar ``tool`` writes every request it serves to an ndjson log on the
volume ``tool_log``; ``main`` mounts that volume READ-ONLY (the anti-cheat: the agent can
read the log, not forge it); test.sh grades the log; ``artifacts`` names the log. Both
images are the offline base image, the sidecar a stdlib HTTP server; no internet.

Graded in ``final`` mode (the default), test.sh runs in a new ``main`` made from the
agent's snapshot: a snapshot carries no volume contents, so that ``main`` mounts the same
volume. The agent is an adversary: as root it cannot write the read-only mount (EROFS), nor
move it aside to plant a log of its own at the path; either way the verdict reads the
sidecar's log and scores what doing nothing scores."""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

import anyio
import pytest

from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task, load_task
from tests.formats.test_harbor import TOML, harbor_task
from tests.security.harness import LIMITS, cheat_policy

pytestmark = pytest.mark.anyio

COMPOSE = """\
services:
  tool:
    build:
      context: ./tool_service
    command: ["python3", "/srv/app.py"]
    volumes:
      - tool_log:/var/log/api
    healthcheck:
      test:
        - CMD
        - python3
        - -c
        - import urllib.request as u; u.urlopen('http://localhost:8080/health', timeout=2)
      interval: 1s
      timeout: 5s
      retries: 30
  main:
    environment:
      TOOL_SERVICE_URL: http://tool:8080
    volumes:
      - tool_log:/srv/tool-log:ro
    depends_on:
      tool:
        condition: service_healthy
volumes:
  tool_log:
"""

# the sidecar: every request but the healthcheck appended to the log on the shared volume
APP = """\
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer

LOG = "/var/log/api/requests.ndjson"

class Handler(BaseHTTPRequestHandler):
    def _reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._reply(200, b"ok")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        with open(LOG, "a") as log:
            log.write(json.dumps({"method": "POST", "path": self.path, "body": body}) + "\\n")
        self._reply(201, b"created")

    def log_message(self, *args):
        pass

open(LOG, "a").close()
HTTPServer(("", 8080), Handler).serve_forever()
"""

SOLVE = """\
python3 - <<'PY'
import json, os, urllib.request as u
event = json.dumps({"title": "Deep Work Block"}).encode()
u.urlopen(u.Request(os.environ["TOOL_SERVICE_URL"] + "/calendar/events", data=event)).read()
PY
"""

TEST = """\
python3 - <<'PY'
import json
lines = open("/srv/tool-log/requests.ndjson").read().splitlines()
print("the log holds", len(lines), "requests:", lines)
made = any(
    r.get("path") == "/calendar/events" and json.loads(r["body"]).get("title") == "Deep Work Block"
    for r in map(json.loads, lines)
)
open("/logs/verifier/reward.txt", "w").write("1\\n" if made else "0\\n")
PY
"""

# a log line as the sidecar writes it for the oracle's request: test.sh would score it 1.0
FORGED = json.dumps(
    {"method": "POST", "path": "/calendar/events", "body": json.dumps({"title": "Deep Work Block"})}
)

# as root: append to the log, replace it, move the mount aside and plant a log at its path,
# unmount it; then plant copies elsewhere test.sh might be pointed at
FORGE = f"""\
id -u
echo '{FORGED}' >> /srv/tool-log/requests.ndjson && echo APPENDED
echo '{FORGED}' > /srv/tool-log/forged && echo CREATED
mv /srv/tool-log /srv/tool-log-moved && echo MOVED
umount /srv/tool-log && echo UNMOUNTED
mkdir -p /srv/tool-log && echo '{FORGED}' > /srv/tool-log/requests.ndjson && echo PLANTED
mkdir -p /app/srv/tool-log /tmp/srv/tool-log
echo '{FORGED}' > /app/srv/tool-log/requests.ndjson
echo '{FORGED}' > /tmp/srv/tool-log/requests.ndjson
"""


def scheduler_task(root: Path) -> Task:
    """The task, as scheduler lays it out (``FROM`` lines: the offline base image)."""
    toml = 'artifacts = ["/srv/tool-log/requests.ndjson"]\n' + TOML.format(
        verifier_timeout=60.0, extra=""
    )
    folder = harbor_task(root, "scheduler", test=textwrap.dedent(TEST), solve=SOLVE, toml=toml)
    environment = folder / "environment"
    (environment / "tool_service").mkdir()
    (environment / "tool_service" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY app.py /srv/app.py\n"
    )
    (environment / "tool_service" / "app.py").write_text(APP)
    (environment / "docker-compose.yaml").write_text(COMPOSE)
    task = load_task(folder)  # was refused: services.main.volumes
    return task.model_copy(update={"limits": LIMITS, "user": "root"})


def _logged(final_artifacts: object) -> str:
    """The collected copy of the log (``artifacts``), read from the episode's archive."""
    assert final_artifacts is not None
    with tarfile.open(final_artifacts) as tar:  # type: ignore[call-overload]
        for member in tar.getmembers():
            if member.name.endswith("srv/tool-log/requests.ndjson"):
                got = tar.extractfile(member)
                assert got is not None
                return got.read().decode()
    raise AssertionError(f"no log among {tar.getnames()}")


@pytest.mark.on_docker
async def test_main_mounts_the_group_volume_read_only_and_the_verdict_reads_it(
    tmp_path: Path,
) -> None:
    task = scheduler_task(tmp_path)
    assert task.verify_in == "final"
    runs: dict[str, tuple[float | None, str, str]] = {}

    async def one(name: str, script: str | None) -> None:
        policy = cheat_policy("#!/bin/bash\n" + (script or "true\n"), tmp_path / "runs", name)
        traj, final = await run_task(task, policy, backend="docker")
        assert traj.score is not None and traj.score.error is None, (name, traj.score)
        said = " ".join(str(m.get("content")) for m in traj.messages)
        runs[name] = (traj.reward, said, _logged(final.artifacts))

    async with anyio.create_task_group() as tg:  # two at a time: the host has 2 cores
        for name, script in (("oracle", SOLVE), ("null", None), ("forge", FORGE)):
            tg.start_soon(one, name, script)

    assert runs["oracle"][0] == 1.0, runs["oracle"]
    assert '"path": "/calendar/events"' in runs["oracle"][2]  # collected through the mount
    assert runs["null"][0] == 0.0, runs["null"]
    assert runs["null"][2] == ""
    reward, said, logged = runs["forge"]
    assert reward == 0.0, runs["forge"]
    assert logged == ""  # the sidecar's log, untouched
    assert "Read-only file system" in said and "Device or resource busy" in said, said
    for done in ("APPENDED", "CREATED", "MOVED", "UNMOUNTED", "PLANTED"):
        assert done not in said, said


@pytest.mark.no_docker
def test_a_bind_into_main_is_refused_by_name(tmp_path: Path) -> None:
    task = scheduler_task(tmp_path)
    assert task.compose is not None
    compose = tmp_path / "scheduler" / "environment" / "docker-compose.yaml"
    for bind in ("./tool_service:/srv/tool:ro", "/etc:/host-etc", "../tests:/t"):
        line = "      - tool_log:/srv/tool-log:ro\n"
        compose.write_text(COMPOSE.replace(line, f"{line}      - {bind}\n"))
        with pytest.raises(TaskError) as caught:
            load_task(tmp_path / "scheduler")
        assert "services.main.volumes[1]: " in str(caught.value), bind
    compose.write_text(COMPOSE.replace("tool_log:/srv/tool-log:ro", "other:/srv/x"))
    with pytest.raises(TaskError, match=r"services.main.volumes\[0\]: the volume 'other'"):
        load_task(tmp_path / "scheduler")


@pytest.mark.no_docker
def test_a_volume_spec_is_checked_and_podman_refuses_it_by_name() -> None:
    from agentenv.sandbox.errors import SandboxError
    from agentenv.sandbox.podman.driver import _create_args
    from agentenv.sandbox.spec import NamedVolume, SandboxSpec

    log = NamedVolume(name="p_tool_log", target="/srv/tool-log", read_only=True)
    with pytest.raises(ValueError, match="absolute and not '/'"):
        NamedVolume(name="v", target="srv")
    with pytest.raises(ValueError, match="volume targets must differ"):
        SandboxSpec(volumes=(log, log))
    with pytest.raises(ValueError, match="volume targets must differ"):
        SandboxSpec(read_only=True, volumes=(log.model_copy(update={"target": "/workspace"}),))
    spec = SandboxSpec(volumes=(log,))
    assert hash(spec) == hash(SandboxSpec(volumes=(log,)))
    with pytest.raises(SandboxError, match=r"named volumes .* need the docker backend"):
        _create_args(spec.model_copy(update={"backend": "podman"}), BASE_IMAGE)


@pytest.mark.no_docker
async def test_a_snapshot_spec_naming_the_volumes_already_mounts_them_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentenv.sandbox.compose import sandbox as compose_sandbox
    from agentenv.sandbox.spec import NamedVolume, SandboxSpec

    log = NamedVolume(name="p_tool_log", target="/srv/tool-log", read_only=True)
    made: list[SandboxSpec] = []

    class Group:
        project, engine = "p", None

        async def thaw(self) -> None:
            pass

        async def join(self, container: str, alias: str) -> None:
            pass

    class Box:
        id = "box"

        @staticmethod
        async def create(spec: SandboxSpec, engine: object) -> Box:
            made.append(spec)
            return Box()

    monkeypatch.setattr(compose_sandbox, "DockerSandbox", Box)
    kept = compose_sandbox.KeptServices(Group(), {}, (log,))  # type: ignore[arg-type]
    await kept.create(SandboxSpec(volumes=(log,)))  # a snapshot's spec: its sandbox's
    await kept.create(SandboxSpec())
    assert [s.volumes for s in made] == [(log,), (log,)]

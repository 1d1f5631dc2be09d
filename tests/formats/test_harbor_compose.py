"""Harbor tasks with ``environment/docker-compose.yaml`` run (they were refused): ``main``
built from ``environment/``, the services beside it on a private network of their own,
reached by name, started once their healthchecks pass; test.sh runs in ``main`` with the
services up. The task here mirrors real ones (Harbor's cookbook ``mcp-tools``: a service
built from a folder of ``environment/`` with a healthcheck that ``main`` depends on;
grafana/o11y-bench: ``main`` given the service's URL in its environment, the service given
a file of the task as a read-only bind): a small HTTP service built FROM the offline base
image holds a token; the agent must hand it back; test.sh asks the service what it got."""

from __future__ import annotations

import tarfile
import textwrap
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.runner.episode import prepare
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from tests.formats.test_harbor import _run, harbor_task

pytestmark = pytest.mark.anyio

COMPOSE = """\
services:
  main:
    depends_on:
      api:
        condition: service_healthy
      cache:
        condition: service_started
    environment:
      API_URL: "http://api:8080"
  api:
    build:
      context: ./api
    command: ["python3", "/srv/app.py"]
    environment:
      GREETING: "${GREETING:-hi}"
    volumes:
      - ./setup.json:/task/setup.json:ro
      - data:/data
    expose:
      - "8080"
    healthcheck:
      test:
        - CMD
        - python3
        - -c
        - import urllib.request as u; u.urlopen('http://localhost:8080/health', timeout=2)
      interval: 1s
      timeout: 5s
      retries: 30
  cache:
    image: agentenv/base:bookworm
    command: ["sh", "-c", "while :; do sleep 1; done"]
volumes:
  data: {}
"""

APP = """\
import http.server, json

class Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, body, code=200):
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self):
        if self.path == "/health":
            return self._send("ok")
        if self.path == "/token":
            return self._send(json.load(open("/task/setup.json"))["token"])
        if self.path == "/submitted":
            try:
                return self._send(open("/data/submitted").read())
            except OSError:
                return self._send("", 404)
        self._send("no", 404)

    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        with open("/data/submitted", "w") as f:
            f.write(data)
        self._send("stored")

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
"""

SOLVE = """\
python3 - <<'PY'
import os, urllib.request as u
token = u.urlopen(os.environ["API_URL"] + "/token").read()
u.urlopen(u.Request(os.environ["API_URL"] + "/submit", data=token, method="POST")).read()
PY
"""

TEST = """\
ask='import urllib.request as u; print(u.urlopen("http://api:8080/submitted").read().decode())'
got=$(python3 -c "$ask" 2>&1)
echo "the service got: $got"
if [ "$got" = blue-42 ]; then reward=1; else reward=0; fi
echo $reward > /logs/verifier/reward.txt
"""


def write_environment(environment: Path, compose: str = COMPOSE) -> Path:
    """A compose environment (main's Dockerfile, the api service's folder, its setup file)
    in ``environment``; the compose file's path."""
    (environment / "api").mkdir(parents=True, exist_ok=True)
    (environment / "api" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nCOPY app.py /srv/app.py\n")
    (environment / "api" / "app.py").write_text(APP)
    (environment / "setup.json").write_text('{"token": "blue-42"}\n')
    (environment / "docker-compose.yaml").write_text(compose)
    return environment / "docker-compose.yaml"


def compose_task(root: Path, name: str = "token", compose: str = COMPOSE) -> Path:
    folder = harbor_task(root, name, test=textwrap.dedent(TEST), solve=SOLVE)
    write_environment(folder / "environment", compose)
    return folder


@pytest.mark.on_docker
async def test_a_compose_task_runs_oracle_1_null_0(tmp_path: Path) -> None:
    folder = compose_task(tmp_path)
    task = load_task(folder)  # was refused: "docker-compose environments are not supported"
    assert task.compose == "environment/docker-compose.yaml"
    assert task.verify_in == "final" and task.verifier is not None
    assert task.verifier.model_dump()["mode"] == "final"  # a new main, beside the services
    # on Docker whatever the suite's backend: Podman refuses compose tasks (a test below)
    reward, checks = await _run(folder, "oracle", backend="docker")
    assert reward == 1.0, checks
    reward, checks = await _run(folder, "null", backend="docker")
    assert reward == 0.0, checks
    assert "the service got:" in " ".join(checks)


def refused(folder: Path) -> str:
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    return str(caught.value)


@pytest.mark.no_docker
def test_what_the_compose_runner_does_not_honour_is_refused_by_name(tmp_path: Path) -> None:
    bad = COMPOSE.replace(
        "    expose:\n", "    privileged: true\n    ports:\n      - '8080:8080'\n    expose:\n"
    )
    bad = bad.replace(
        "      - data:/data\n",
        "      - data:/data\n      - /var/run/docker.sock:/var/run/docker.sock\n"
        "      - ../../secrets:/s\n",
    )
    bad = bad.replace(
        "    image: agentenv/base:bookworm\n",
        "    image: agentenv/base:bookworm\n    network_mode: host\n"
        "    environment:\n      KEY: ${HOST_SECRET}\n",
    )
    bad = bad.replace(
        "  main:\n", "  main:\n    build: .\n    volumes:\n      - ./setup.json:/x:ro\n"
    )
    bad += "networks:\n  outside:\n    external: true\n"
    message = refused(compose_task(tmp_path, "bad", bad))
    for field in (
        "services.api.privileged: is not supported",
        "services.api.ports: is not supported",
        "services.api.volumes[2]: '/var/run/docker.sock' is outside the task's environment/",
        "services.api.volumes[3]: '../../secrets' is outside",
        "services.cache.network_mode: is not supported",
        "services.cache.environment.KEY: ${HOST_SECRET} is not set",
        "services.main.build: is Harbor's to set for main",
        "services.main.volumes[0]: a bind of a host path into main is not supported",
        "networks.outside.external: is not supported",
    ):
        assert field in message, message
    unhealthy = COMPOSE.replace(
        "      cache:\n        condition: service_started",
        "      cache:\n        condition: service_healthy",
    )
    message = refused(compose_task(tmp_path, "never-healthy", unhealthy))
    assert "services.main.depends_on.cache: waits for 'cache' to be healthy, but" in message


@pytest.mark.no_docker
def test_the_real_cookbook_compose_file_is_read_as_harbor_lays_it_out(tmp_path: Path) -> None:
    with tarfile.open(Path(__file__).parent / "harbor_tasks" / "cookbook.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    from agentenv.sandbox.compose import read_compose

    env = tmp_path / "mcp-tools" / "environment"
    compose = read_compose(env / "docker-compose.yaml", {"COMPOSE_PROJECT_NAME": "p"})
    assert compose.main.depends_on == {"mcp-server": "service_healthy"}
    (server,) = compose.side
    assert server.build is not None and server.build.context == (env / "mcp-server").resolve()
    assert server.healthcheck is not None and server.healthcheck.start_period_s == 5.0
    assert server.healthcheck.test[0] == "CMD" and server.expose == ["8000"]


@pytest.mark.no_docker
async def test_podman_refuses_a_compose_task_by_name(tmp_path: Path) -> None:
    task = load_task(compose_task(tmp_path))
    with pytest.raises(SandboxError, match="compose environments need the docker backend"):
        await prepare(task, backend="podman")

"""Every field of Harbor's task.toml (schema 1.0 to 1.4) is honoured or refused at load,
naming the file and the field; an unknown key is refused (Harbor's own models would drop
it without a word). Real tasks: harbor-framework/harbor-cookbook recipes (harbor_tasks/)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task

pytestmark = pytest.mark.no_docker

COOKBOOK = Path(__file__).parent / "harbor_tasks" / "cookbook.tar.gz"


def task(root: Path, toml: str, name: str = "t") -> Path:
    """A Harbor task folder whose task.toml is ``toml``."""
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return folder


def refused(folder: Path) -> str:
    with pytest.raises(TaskError) as e:
        load_task(folder)
    return str(e.value)


def cookbook(root: Path, name: str) -> Path:
    with tarfile.open(COOKBOOK) as tar:
        tar.extractall(root, filter="data")
    folder = root / name
    dockerfile = folder / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines()
    dockerfile.write_text(
        "\n".join(f"FROM {BASE_IMAGE}" if x.startswith("FROM ") else x for x in lines)
    )
    return folder


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2", "1.3", "1.4"])
def test_every_schema_version_loads(tmp_path: Path, version: str) -> None:
    load_task(task(tmp_path, f'schema_version = "{version}"\n'))
    assert "1.5" in refused(task(tmp_path, 'schema_version = "1.5"\n', "new"))


REFUSALS = {
    '[[steps]]\nname = "../up"\n': "steps[0].name: '../up' is not a folder name",
    'multi_step_reward_strategy = "best"\n': "multi_step_reward_strategy: 'best' is not one",
    '[[environment.mcp_servers]]\nname = "m"\nurl = "http://m/mcp"\n': (
        "environment.mcp_servers[0].url: http://m/mcp: agentenv reaches MCP servers only at"
    ),
    '[environment]\nallowed_hosts = ["pypi.org"]\n': (
        "environment.allowed_hosts: is only valid with network_mode = 'allowlist'"
    ),
    '[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["https://pypi.org"]\n': (
        "agent.allowed_hosts[0]: 'https://pypi.org' is not a hostname"
    ),
    '[verifier]\nenvironment_mode = "shared"\nnetwork_mode = "public"\n': (
        "verifier.network_mode: 'public' differs"
    ),
    '[verifier]\nenvironment_mode = "fresh"\n': "verifier.environment_mode: 'fresh' is not",
    '[verifier.environment]\nskills_dir = "/s"\n': "verifier.environment.skills_dir: Harbor does",
    '[[artifacts]]\nsource = "/w"\ndestination = "../w"\n': "artifacts[0].destination: '../w'",
    '[agent]\nuser = "a gent"\n': "agent.user: 'a gent' is not a user name or a uid",
    '[environment.env]\n"A=B" = "1"\n': "environment.env.A=B: 'A=B' is not an environment",
    "[environment.healthcheck]\ncommand = 'true'\ninterval_sec = -1\n": (
        "environment.healthcheck.interval_sec: -1"
    ),
    '[verifier]\nuser = "a gent"\n': "verifier.user: 'a gent' is not a user name or a uid",
    "[environment]\ngpus = 1\n": "environment.gpus: 1: agentenv's sandboxes have no GPUs",
    '[environment]\ntpu = {type = "v6e", topology = "2x2"}\n': "environment.tpu: agentenv's",
    '[environment]\nos = "windows"\n': "environment.os: 'windows': agentenv runs Linux",
    '[environment]\nworkdir = "app"\n': "environment.workdir: 'app' is not an absolute path",
    "[agent]\ntimeout_secs = 60\n": "agent.timeout_secs: not a key Harbor's task.toml has in "
    "[agent] (did you mean 'timeout_sec'?)",
    "[environment.healthcheck]\ncommand = 'true'\nretry = 2\n": "environment.healthcheck.retry",
    "gpu = 1\n": "gpu: not a key Harbor's task.toml has in the top level",
}


@pytest.mark.parametrize("toml", list(REFUSALS), ids=[v.split(":")[0] for v in REFUSALS.values()])
def test_each_refusal_names_the_file_and_the_field(tmp_path: Path, toml: str) -> None:
    folder = task(tmp_path, 'schema_version = "1.4"\n' + toml)
    assert f"{folder / 'task.toml'}: {REFUSALS[toml]}" in refused(folder)


def test_what_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H31_TOKEN", "from-host")
    monkeypatch.delenv("H31_UNSET", raising=False)
    toml = """\
schema_version = "1.4"
source = "somewhere"
[task]
name = "acme/the-task"
version = "1.0.0"
authors = [{ name = "A", email = "a@b.c" }]
workstream = "kept: a task set's own descriptive key"
[metadata]
anything = "kept: Harbor's metadata is a free table"
[environment]
workdir = "/srv/work"
build_timeout_sec = 300
network_mode = "no-network"
gpus = 0
mcp_servers = []
os = "Linux"
[agent]
user = 1000
network_mode = "public"
[verifier]
environment_mode = "shared"
[verifier.env]
TOKEN = "${H31_TOKEN}"
MODE = "${H31_UNSET:-fallback}"
LITERAL = "x-${H31_TOKEN}"
"""
    loaded = load_task(task(tmp_path, toml))
    assert loaded.id == "the-task" and loaded.workdir == "/srv/work"
    assert loaded.user == "1000" and loaded.network == "bridge"
    assert loaded.verifier is not None
    assert loaded.verifier.model_dump()["env"] == {
        "TOKEN": "from-host",
        "MODE": "fallback",
        "LITERAL": "x-${H31_TOKEN}",  # Harbor resolves a whole-value template only
    }


def test_a_missing_variable_without_default_is_refused_by_name(tmp_path: Path) -> None:
    toml = 'schema_version = "1.4"\n[verifier.env]\nKEY = "${H31_SURELY_UNSET}"\n'
    message = refused(task(tmp_path, toml))
    assert "task.toml: verifier.env.KEY: ${H31_SURELY_UNSET} needs the host's" in message
    from agentenv.formats.harbor.envvars import resolve

    problems: list[tuple[str, str]] = []
    got = resolve({"A": "${X:-}", "B": "${X}"}, "e", lambda f, m: problems.append((f, m)), {})
    assert got == {"A": ""} and problems[0][0] == "e.B"


def test_real_cookbook_tasks_load_or_are_refused_naming_the_feature(tmp_path: Path) -> None:
    simple = load_task(cookbook(tmp_path, "simple-task"))
    assert (simple.workdir, simple.cpus, simple.memory) == ("/app", 1.0, 2048 << 20)
    assert simple.limits.wall_time_s == 120.0 and simple.network == "none"
    assert load_task(cookbook(tmp_path, "skills")).skills_dir == "/skills"  # test_harbor_skills
    # its steps run, their artifacts are collected (test_harbor_steps_more.py)
    multi = load_task(cookbook(tmp_path, "multi-step")).multi_step
    assert multi is not None and [a.source for a in multi.steps[2].artifacts] == ["/app/README.md"]
    mcp = load_task(cookbook(tmp_path, "mcp-tools"))  # its server's tools: tests/agent/test_mcp.py
    assert mcp.compose is not None and [s.name for s in mcp.mcp_servers] == ["mcp-server"]

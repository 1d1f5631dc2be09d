"""An Inspect AI eval end to end on the ``agentenv`` sandbox type, found through Inspect's
entry points as a user's ``sandbox="agentenv"`` finds it: the ``mockllm`` model, a solver
working in the sandbox, a scorer reading the sandbox's file. Then nothing of it is left."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox

from agentenv.integrations.inspect import LABEL_TASK, AgentenvSandboxEnvironment, spec_for
from agentenv.sandbox import SandboxSpec, create, get_backend
from agentenv.sandbox.images import BASE_IMAGE


@solver
def shout_into_a_file():  # type: ignore[no-untyped-def]
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        env = sandbox()
        ours = env.as_type(AgentenvSandboxEnvironment)  # what Inspect found for "agentenv"
        state.metadata["paused_after_generate"] = ours.sandbox.paused
        result = await env.exec(
            ["sh", "-c", 'printf %s "$WORD" | tr a-z A-Z > answer.txt; id -u'],
            env={"WORD": state.input_text},
        )
        state.metadata["uid"] = result.stdout.strip()
        return state

    return solve


@scorer(metrics=[accuracy()])
def answer_file():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        text = await sandbox().read_file("answer.txt")
        return Score(value="C" if text == target.text else "I", answer=text)

    return score


def test_an_inspect_eval_runs_in_agentenv_sandboxes(tmp_path: Path) -> None:
    name = f"agentenv-e2e-{tmp_path.name}"
    task = Task(
        name=name,
        dataset=[Sample(input="hello", target="HELLO"), Sample(input="world", target="WORLD")],
        solver=shout_into_a_file(),
        scorer=answer_file(),
        sandbox="agentenv",
    )
    # usage given: mockllm would otherwise count tokens with tiktoken, which downloads its
    # encoding (no network here)
    outputs = []
    for _ in range(2):
        output = ModelOutput.from_content(model="mockllm/model", content="on it")
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        outputs.append(output)
    model = get_model("mockllm/model", custom_outputs=outputs)
    # in a thread of its own: Inspect runs its own event loop, and a higher-scoped async
    # fixture of another test module (the security battery's) may hold one in this thread
    with ThreadPoolExecutor(1) as thread:
        run = thread.submit(inspect_eval, task, model=model, log_dir=str(tmp_path), display="none")
        [log] = run.result()
    assert log.status == "success", log.error
    assert log.results is not None
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert log.samples is not None and len(log.samples) == 2
    for sample in log.samples:
        assert sample.error is None
        assert sample.metadata["paused_after_generate"] is True  # frozen while it generated
        assert sample.metadata["uid"] == "0"  # root, as Inspect's sandboxes run
    left = docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_TASK}={name}"})
    assert left == []


@pytest.mark.no_docker
def test_configs_map_to_specs(tmp_path: Path) -> None:
    default = spec_for(None)
    assert default.image == BASE_IMAGE and default.network == "none" and default.user is None
    assert set(default.cap_add) == {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"}
    given = SandboxSpec(image="python:3.12", cpus=2)
    assert spec_for(given) is given
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\n")
    built = spec_for(str(tmp_path / "Dockerfile"))
    assert built.dockerfile == (tmp_path / "Dockerfile").resolve()
    assert built.image.startswith("agentenv-inspect/") and built.cap_add == default.cap_add
    (tmp_path / "spec.json").write_text('{"image": "alpine:3", "memory": "1g"}')
    assert spec_for(str(tmp_path / "spec.json")).memory == 1 << 30
    (tmp_path / "compose.yaml").write_text("services: {}\n")
    with pytest.raises(ValueError, match="compose"):
        spec_for(str(tmp_path / "compose.yaml"))
    with pytest.raises(FileNotFoundError):
        spec_for(str(tmp_path / "missing" / "Dockerfile"))


def test_the_readme_example_runs_through_inspects_command_line(tmp_path: Path) -> None:
    # `inspect eval examples/inspect_task.py`, as the README shows it: the sandbox type is
    # found through the installed entry point, in a process of its own
    inspect = Path(sys.executable).with_name("inspect")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(  # Inspect takes a task file's path relative to where it runs
        [inspect, "eval", "examples/inspect_task.py", "--display", "plain", "--log-dir", tmp_path],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [log] = [read_eval_log(str(p)) for p in tmp_path.glob("*.eval")]
    assert log.status == "success" and log.results is not None
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert log.samples is not None and len(log.samples) == 3


@pytest.mark.anyio
async def test_cleanup_by_id_takes_one_unambiguous_sandbox() -> None:
    box = await create(SandboxSpec())
    try:
        with pytest.raises(ValueError, match="at least 6 characters"):
            await AgentenvSandboxEnvironment.cli_cleanup(box.id[:3])
        with pytest.raises(ValueError, match="names no agentenv sandbox"):
            await AgentenvSandboxEnvironment.cli_cleanup("0" * 64)
        await AgentenvSandboxEnvironment.cli_cleanup(box.id[:12])
        ids = {row.id for row in get_backend().leftovers() if row.kind == "sandbox"}
        assert box.id not in ids
    finally:
        await box.close()

"""Bad input gets one clear error each: unknown image, invalid spec values, no engine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from agentenv.sandbox import EngineUnavailable, ImageUnavailable, SandboxSpec
from agentenv.sandbox.docker import DockerSandbox, connect

pytestmark = pytest.mark.anyio


async def test_unknown_image_names_the_image_and_what_was_tried() -> None:
    with pytest.raises(ImageUnavailable) as info:
        await DockerSandbox.create(SandboxSpec(image="agentenv-test/no-such-image:1"))
    message = str(info.value)
    assert "agentenv-test/no-such-image:1" in message
    assert "not present locally" in message and "pull failed" in message
    assert "Dockerfile" in message


@pytest.mark.no_docker
@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("memory", "12q", "not a size"),
        ("memory", "1m", "at least 6m"),
        ("cpus", -1, "greater than 0"),
        ("pids_limit", 0, "greater than or equal to 8"),
        ("workdir", "/", "must not be '/'"),
        ("workdir", "relative/dir", "absolute"),
        ("network", "host", "host's network"),
        ("network", "container:abc", "another container's network"),
        ("cap_add", ["NOT_A_CAP"], "unknown capabilities: NOT_A_CAP"),
        ("labels", {"agentenv.run": "x"}, "are ours"),
        ("executor", "turbo", "'auto', 'fast' or 'docker-exec'"),
        ("nonsense", 1, "Extra inputs are not permitted"),
    ],
)
def test_invalid_spec_values_name_the_field(field: str, value: object, expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        SandboxSpec(**{field: value})  # type: ignore[arg-type]
    message = str(info.value)
    assert field in message
    assert expected in message


@pytest.mark.no_docker
def test_spec_parses_sizes() -> None:
    assert SandboxSpec(memory="512m").memory == 512 << 20
    assert SandboxSpec(memory="1.5GiB").memory == 3 << 29
    assert SandboxSpec(memory=64 << 20).memory == 64 << 20
    assert SandboxSpec(cap_add=["cap_net_raw"]).cap_add == ("NET_RAW",)


@pytest.mark.no_docker
def test_unreachable_engine_says_how_to_start_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/agentenv-no-engine.sock")
    with pytest.raises(EngineUnavailable) as info:
        connect()
    message = str(info.value)
    assert "unix:///tmp/agentenv-no-engine.sock" in message
    assert "scripts/setup.sh" in message and "agentenv doctor --fix" in message


@pytest.mark.no_docker
def test_cli_reports_unreachable_engine_without_traceback() -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///tmp/agentenv-no-engine.sock"}
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "sandbox", "ls"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    assert "cannot reach the Docker engine" in done.stderr
    assert "Traceback" not in done.stderr


async def test_malformed_image_name_is_an_image_error() -> None:
    with pytest.raises(ImageUnavailable, match="Bad Image Name"):
        await DockerSandbox.create(SandboxSpec(image="Bad Image Name"))


async def test_unknown_user_is_a_sandbox_error() -> None:
    from agentenv.sandbox import SandboxError

    with pytest.raises(SandboxError, match="no-such-user"):
        await DockerSandbox.create(SandboxSpec(user="no-such-user"))


async def test_unknown_user_is_refused_under_load_too() -> None:
    # Under load Docker often drops its "unable to find user" message from the exec stream
    # (seen in CI): a sandbox was then made with the docker-exec fallback instead of refused.
    import anyio

    from agentenv.sandbox import SandboxError

    outcomes: list[str] = []

    async def one() -> None:
        try:
            box = await DockerSandbox.create(SandboxSpec(user="no-such-user"))
        except SandboxError as e:
            outcomes.append("refused" if "no-such-user" in str(e) else f"other: {e}")
        else:
            outcomes.append(f"created ({box.exec_mode})")
            await box.close()

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    assert outcomes == ["refused"] * 8


async def test_fast_executor_on_an_image_without_python_is_refused(no_python_image: str) -> None:
    from agentenv.sandbox import SandboxError

    with pytest.raises(SandboxError, match="python3"):
        await DockerSandbox.create(SandboxSpec(image=no_python_image, executor="fast"))

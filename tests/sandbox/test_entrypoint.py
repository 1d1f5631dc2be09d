"""A sandbox may start as its image starts (``SandboxSpec.image_entrypoint``, what Harbor's
tasks need): the image's ENTRYPOINT runs, as the image's USER, with the keep-alive as its
command, as Harbor runs a task's image (its CMD replaced by a sleep, its ENTRYPOINT kept).
Pausing works on it as on any sandbox; recycling refuses it (what the entrypoint started
cannot be started again in place). Docker and Podman alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.recycling import recycling

pytestmark = pytest.mark.anyio

# The entrypoint of many Harbor tasks' images: start a service, then `exec "$@"` (Harbor's
# command, a sleep); it leaves a mark of who ran it and with what.
ENTRY = """#!/bin/sh
echo "$(id -un) $*" > /tmp/entry-ran
python3 -m http.server 8765 --bind 127.0.0.1 --directory /srv/site >/dev/null 2>&1 &
exec "$@"
"""

DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN useradd -m -u 1234 app && mkdir -p /srv/site && echo gateway-ok > /srv/site/health
COPY entry.sh /entry.sh
RUN chmod 0755 /entry.sh
USER app
WORKDIR /home/app
ENTRYPOINT ["/entry.sh"]
CMD ["/bin/false"]
"""

PROBE = (
    "python3 - <<'EOF'\n"
    "import time, urllib.request\n"
    "for _ in range(100):\n"
    "    try:\n"
    "        print(urllib.request.urlopen('http://127.0.0.1:8765/health').read().decode())\n"
    "        break\n"
    "    except OSError:\n"
    "        time.sleep(0.1)\n"
    "EOF"
)


def _backends() -> list[object]:
    return ["docker", pytest.param("podman", marks=pytest.mark.podman)]


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("entrypoint")
    (folder / "entry.sh").write_text(ENTRY)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    return folder


def _spec(backend: str, folder: Path, **fields: object) -> SandboxSpec:
    tag = f"agentenv-test/entrypoint:{os.environ['AGENTENV_RUN_ID']}"
    return SandboxSpec(
        backend=backend,
        image=tag,
        dockerfile=folder / "Dockerfile",
        image_entrypoint=True,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("backend", _backends())
async def test_the_images_entrypoint_starts_its_service_as_its_user(
    backend: str, image_folder: Path
) -> None:
    async with await create(_spec(backend, image_folder, workdir="/home/app")) as box:
        ran = await box.exec("cat /tmp/entry-ran; id -un; pwd")
        who, me, where = ran.stdout.splitlines()
        assert who.startswith("app /bin/sh -c "), ran  # the keep-alive as its arguments
        assert (me, where) == ("app", "/home/app"), ran
        assert (await box.exec(PROBE, timeout=30)).stdout.strip() == "gateway-ok"
        await box.pause()
        await box.resume()
        assert (await box.exec(PROBE, timeout=30)).stdout.strip() == "gateway-ok"


@pytest.mark.parametrize("backend", _backends())
async def test_a_workdir_the_image_lacks_is_made(backend: str, image_folder: Path) -> None:
    async with await create(_spec(backend, image_folder, workdir="/srv/work/here")) as box:
        ran = await box.exec("pwd; cat /tmp/entry-ran")
        assert ran.ok and ran.stdout.splitlines()[0] == "/srv/work/here", ran


@pytest.mark.parametrize("backend", _backends())
async def test_the_keepalive_still_holds_without_an_entrypoint(backend: str) -> None:
    spec = SandboxSpec(backend=backend, image=BASE_IMAGE, image_entrypoint=True)
    async with await create(spec) as box:
        assert (await box.exec("echo up")).stdout.strip() == "up"


async def test_a_sandbox_started_by_its_image_is_not_recycled(image_folder: Path) -> None:
    spec = _spec("docker", image_folder, read_only=True, user="1234:1234", workdir="/w")
    async with recycling():
        box = await create(spec)
        try:
            assert not await box.recycle()  # its service would not be started again
        finally:
            await box.close()

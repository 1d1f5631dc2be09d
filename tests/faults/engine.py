"""A Docker engine of the fault tests' own: its own socket, data-root (a small ext4 file
system on a loop device, so a test can fill the disk for real), exec-root, pid file and
network namespace, the base image loaded into it once. Tests kill, restart and starve it;
the engine the rest of the suite uses never notices."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import RESERVED_PREFIX

DISK_GIB = 3  # the base image (~0.3 GB) and the tasks' images fit; a test fills the rest
START_S = 60.0


class PrivateEngine:
    """One ``dockerd`` under ``root``; :meth:`start` it, then point ``DOCKER_HOST`` (see
    :attr:`env`) at it. :meth:`close` stops it and removes everything it had."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        self.exec_root = root / "exec"
        self.pidfile = root / "docker.pid"
        self.socket = root / "docker.sock"
        self.log = root / "dockerd.log"
        self._disk = root / "disk.img"
        self._process: subprocess.Popen[bytes] | None = None
        self._mounted = False

    @property
    def host(self) -> str:
        """Its ``DOCKER_HOST``."""
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        """This process's environment, pointed at this engine."""
        return {**os.environ, "DOCKER_HOST": self.host}

    def _mount(self) -> None:
        if self._mounted:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(exist_ok=True)
        with open(self._disk, "wb") as disk:
            disk.truncate(DISK_GIB << 30)  # sparse: costs the host only what is written
        # no blocks reserved for root: dockerd is root, and full must mean full
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self._disk)], check=True)
        subprocess.run(["mount", "-o", "loop", str(self._disk), str(self.data)], check=True)
        self._mounted = True

    def start(self) -> None:
        """Start it (after clearing what a killed one left: pid files, its socket) and
        wait until it answers; the first time, make its disk and load the base image."""
        first = not self._mounted
        self._mount()
        self.pidfile.unlink(missing_ok=True)
        self.socket.unlink(missing_ok=True)
        # a killed dockerd's containerd dies with it but may stay a zombie nobody reaps:
        # its pid file would make the new dockerd wait for it for ever
        (self.exec_root / "containerd" / "containerd.pid").unlink(missing_ok=True)
        config = self.root / "daemon.json"
        config.write_text("{}\n")  # not the host's /etc/docker/daemon.json
        # its own network namespace: an engine manages its bridge and iptables, and a second
        # one in the host's would take docker0 from the main engine (it did, once)
        argv = [
            "unshare", "--net", "--", "dockerd", "--config-file", str(config),
            "--data-root", str(self.data), "--exec-root", str(self.exec_root),
            "--pidfile", str(self.pidfile), "--host", self.host,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + START_S
        while self.docker("info", check=False).returncode != 0:
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace").splitlines()[-10:]
                raise RuntimeError("the private dockerd did not start:\n" + "\n".join(tail))
            time.sleep(0.2)
        if first:
            self._load_base_image()

    def _load_base_image(self) -> None:
        save = subprocess.Popen(["docker", "save", BASE_IMAGE], stdout=subprocess.PIPE)
        assert save.stdout is not None
        subprocess.run(
            ["docker", "load", "-q"], stdin=save.stdout, env=self.env, check=True,
            capture_output=True,
        )  # fmt: skip
        save.stdout.close()
        if save.wait() != 0:
            raise RuntimeError(f"docker save {BASE_IMAGE} failed on the main engine")

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig`` to dockerd and wait until it is gone (SIGTERM: its clean shutdown,
        which stops the containers; SIGKILL: none, the containers' shims live on)."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """:meth:`kill` it with ``sig`` and start it again."""
        self.kill(sig)
        self.start()

    @property
    def running(self) -> bool:
        """Whether its dockerd process is alive."""
        return self._process is not None and self._process.poll() is None

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The docker CLI against this engine."""
        return subprocess.run(
            ["docker", *args], env=self.env, capture_output=True, text=True, check=check,
            timeout=120,
        )  # fmt: skip

    def ours(self) -> list[str]:
        """Containers and images of agentenv's on it (by label): what gc must leave none of."""
        found = []
        for kind in ("ps", "images"):
            extra = ["--all"] if kind == "ps" else []
            lines = self.docker(kind, *extra, "--format", "{{json .}}").stdout.splitlines()
            for line in lines:
                row = json.loads(line)
                if RESERVED_PREFIX in row.get("Labels", "") or (
                    kind == "images"
                    and row.get("Repository", "").startswith("agentenv/")
                    and row.get("Repository") + ":" + row.get("Tag", "") != BASE_IMAGE
                ):
                    found.append(
                        f"{kind}:{row.get('ID')}:{row.get('Names') or row.get('Repository')}"
                    )
        return found

    def containers(self, *filters: str) -> list[str]:
        """Ids of its containers matching ``docker ps --filter`` terms (all states)."""
        argv = ["ps", "--all", "--quiet", *(a for f in filters for a in ("--filter", f))]
        return self.docker(*argv).stdout.split()

    def fill_disk(self) -> None:
        """Fill its data-root's file system: every block taken."""
        filler = self.data / "filler"
        free = shutil.disk_usage(self.data).free - (4 << 20)
        if free > 0:  # most of it at once, then the rest a block at a time
            subprocess.run(["fallocate", "-l", str(free), str(filler)], check=True)
        with open(filler, "ab", buffering=0) as f, contextlib.suppress(OSError):  # to ENOSPC
            while True:
                f.write(b"\0" * 65536)

    def free_disk(self) -> None:
        """Undo :meth:`fill_disk`."""
        (self.data / "filler").unlink(missing_ok=True)

    def close(self) -> None:
        """Stop it, remove its containers and its disk (started again first if a test left
        it killed: the shims of its containers live on until it has stopped them)."""
        if self._mounted and not self.running:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self.start()
        if self.running:
            with contextlib.suppress(subprocess.SubprocessError):
                ids = self.containers()
                if ids:
                    self.docker("rm", "--force", *ids, check=False)
        self.kill(signal.SIGTERM)
        _kill_shims(self.root)
        if self._mounted:
            subprocess.run(["umount", "--lazy", str(self.data)], check=False)
            self._mounted = False
        shutil.rmtree(self.root, ignore_errors=True)


def _kill_shims(root: Path) -> None:
    """Kill the containerd shims of this engine that outlived it, and what they hold (a
    container killed mid-creation leaves its shim and a ``runc init`` behind: the engine
    restarted never learns of it, so ``rm --force`` cannot reach it)."""
    address = f"-address {root}/"
    shims, children = set(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if "containerd-shim" in args and address in args:
            shims.add(int(proc.name))
        children.append((int(proc.name), ppid))
    for pid in [pid for pid, ppid in children if ppid in shims] + sorted(shims):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

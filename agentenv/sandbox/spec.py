"""What a sandbox is made from: :class:`SandboxSpec`, validated before anything is created."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentenv.guest import egress
from agentenv.sandbox.labels import RESERVED_PREFIX

DEFAULT_IMAGE = "agentenv/base:bookworm"
GATEWAY_MOUNT = "/run/agentenv/gateway"
"""Where ``SandboxSpec.gateway_dir`` is mounted (read-only) in the sandbox."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

# Linux capabilities a spec may add back after all are dropped.
CAPABILITIES = frozenset(
    [
        "AUDIT_CONTROL",
        "AUDIT_READ",
        "AUDIT_WRITE",
        "BLOCK_SUSPEND",
        "BPF",
        "CHECKPOINT_RESTORE",
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "IPC_LOCK",
        "IPC_OWNER",
        "KILL",
        "LEASE",
        "LINUX_IMMUTABLE",
        "MAC_ADMIN",
        "MAC_OVERRIDE",
        "MKNOD",
        "NET_ADMIN",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_RAW",
        "PERFMON",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_CHROOT",
        "SYS_MODULE",
        "SYS_NICE",
        "SYS_PACCT",
        "SYS_PTRACE",
        "SYS_RAWIO",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "SYSLOG",
        "WAKE_ALARM",
    ]
)


def parse_size(value: int | str) -> int:
    """Bytes from an int or a size such as ``"512m"``, ``"4g"`` or ``"1.5GiB"``."""
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a size like '512m', '4g' or a number of bytes")
        size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size <= 0:
        raise ValueError(f"size must be positive, got {value!r}")
    return size


def _frozen(value: object) -> object:
    """A hashable stand-in for a field's value (a dict as the frozenset of its items)."""
    if isinstance(value, dict):
        return frozenset(value.items())
    return value


class NamedVolume(BaseModel):
    """A named volume of the engine, made beforehand by its owner (a compose group's
    ``tool_log``), mounted in the sandbox at ``target``: what another container writes
    there, the sandbox sees. ``read_only`` is the kernel's, root in the sandbox included.
    The sandbox neither makes nor removes it, and its contents are no part of a snapshot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="the engine's name of the volume")
    target: str = Field(description="where it is mounted (absolute, not '/')")
    read_only: bool = False

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") == "":
            raise ValueError(f"a volume's target must be absolute and not '/', got {value!r}")
        return value


def _default_backend() -> str:
    return os.environ.get("AGENTENV_BACKEND") or "docker"


class SandboxSpec(BaseModel):
    """Everything needed to create a sandbox. Safe by default: no network, no capabilities,
    no new privileges, an init as PID 1, bounded pids, memory and CPU.

    Every field but ``options`` means the same to every backend (each backend refuses what
    it cannot honour); ``options`` holds settings of one backend, which it documents."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str = Field(
        default_factory=_default_backend,
        min_length=1,
        description="which backend makes it ('docker', 'podman' or a registered one); "
        "default: $AGENTENV_BACKEND, else 'docker'",
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="the backend's own settings (both built-in backends take 'runtime', the "
        "OCI runtime to use, e.g. 'runsc'); a backend refuses names it does not know",
    )

    image: str = Field(DEFAULT_IMAGE, min_length=1, description="image name or id")
    dockerfile: Path | None = Field(
        None, description="built (context: its folder) when the image is absent and unpullable"
    )
    build_timeout_s: float | None = Field(
        None, gt=0, description="seconds that build may take: past them it is stopped"
    )
    cpus: float = Field(1.0, gt=0, le=256, description="CPU cores the sandbox may use")
    cpu_shares: int = Field(
        1024,
        ge=2,
        le=262144,
        description="its weight when the host's cores are contended, against other "
        "sandboxes' (the engines' cpu-shares; 1024 is their default); no effect on idle cores",
    )
    memory: int = Field(4 << 30, description="memory limit in bytes (accepts '512m', '4g')")
    pids_limit: int = Field(1024, ge=8, le=1 << 22, description="max processes and threads")
    network: str = Field(
        "none",
        description="'none' (default), 'bridge', 'allowlist' (only ``allowed_hosts``, through "
        "a gateway outside the sandbox; Docker) or a network name",
    )
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description="with network 'allowlist': hostnames, '*.suffix' wildcards, IPs and CIDRs "
        "the sandbox may reach (agentenv/sandbox/docker/egress.py)",
    )
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = Field("/workspace", description="absolute; commands start here")
    user: str | None = Field(None, description="user[:group] to run as; image default if unset")
    image_entrypoint: bool = Field(
        False,
        description="start as the image starts, as Harbor runs a task's image: its "
        "ENTRYPOINT kept, as its USER, with the keep-alive as its command (Harbor's "
        "`sleep infinity`, which replaces its CMD); a service the entrypoint starts runs "
        "beside the agent. Off: the keep-alive replaces both, as root when `user` is set. "
        "Such a sandbox is never recycled (what its entrypoint started would not start again)",
    )
    read_only: bool = Field(
        False,
        description="read-only root filesystem; the workdir is then a fresh volume of at most "
        "`disk` bytes and /tmp a tmpfs: the only writable places, both bounded. Whether the "
        "workdir starts with the image's files is the backend's (Docker: empty; Podman: "
        "copied): upload what it must hold. Snapshots keep neither (use the workdir's tar)",
    )
    disk: int = Field(
        2 << 30, description="bytes the workdir volume may hold when read_only (accepts '2g')"
    )
    tmp_size: int = Field(512 << 20, description="bytes /tmp may hold when read_only")
    scratch: tuple[str, ...] = Field(
        (),
        description="more writable folders when read_only (absolute): each a fresh volume of "
        "at most `disk` bytes, owned by the spec's user, reachable by upload",
    )
    volumes: tuple[NamedVolume, ...] = Field(
        (),
        description="named volumes of the engine mounted in it (Docker; Podman refuses them): "
        "a compose group's, shared with its services; never a path of the host",
    )
    gateway_dir: Path | None = Field(
        None,
        description="a host folder (absolute) mounted read-only at /run/agentenv/gateway: "
        "the model gateway's Unix socket(s), the only way out of a sandbox with no network "
        "for an installed harness (agentenv/harnesses/); nothing else of the host is mounted",
    )
    cap_add: tuple[str, ...] = Field((), description="capabilities added back, e.g. 'CHOWN'")
    labels: dict[str, str] = Field(default_factory=dict)
    ttl_s: float = Field(24 * 3600, gt=0, description="after this, `agentenv gc` may remove it")
    outlive_owner: bool = Field(
        False,
        description="may outlive the process that made it (a suspended rollout resumed by "
        "another process); then only the TTL lets `agentenv gc` remove it",
    )
    executor: Literal["auto", "fast", "docker-exec"] = Field(
        "auto", description="'fast': in-sandbox executor; 'docker-exec': one exec per command"
    )
    freezer: Literal["auto", "engine"] = Field(
        "auto",
        description="how pause() freezes: 'auto' writes the container's cgroup freezer "
        "straight from this host where it may (well under a millisecond, none of the "
        "engine's serialised round trips), else asks the engine; 'engine' always asks the "
        "engine (docker/podman pause)",
    )

    def __hash__(self) -> int:
        """Equal specs hash equal (pydantic's frozen hash fails on the dict fields): callers
        such as Inspect AI key their sandbox configurations by it."""
        return hash(tuple((name, _frozen(value)) for name, value in self))

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: int | str) -> int:
        size = parse_size(value)
        if size < 6 << 20:
            raise ValueError("memory must be at least 6m (Docker's minimum)")
        return size

    @field_validator("disk", "tmp_size", mode="before")
    @classmethod
    def _disk(cls, value: int | str) -> int:
        return parse_size(value)

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?", value):
            raise ValueError(f"user must be 'name', 'uid' or 'uid:gid', got {value!r}")
        return value

    @field_validator("scratch")
    @classmethod
    def _scratch(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not path.startswith("/") or path.rstrip("/") == "":
                raise ValueError(f"scratch folders must be absolute and not '/', got {path!r}")
        return value

    @field_validator("gateway_dir")
    @classmethod
    def _gateway_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError(f"gateway_dir must be an absolute path, got {str(value)!r}")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"workdir must be an absolute path, got {value!r}")
        if value.rstrip("/") == "":
            raise ValueError("workdir must not be '/': give the task a folder of its own")
        return value

    @field_validator("network")
    @classmethod
    def _network(cls, value: str) -> str:
        if value == "host":
            raise ValueError("network 'host' would share the host's network; use 'bridge'")
        if value.startswith("container:"):
            raise ValueError("network 'container:...' would share another container's network")
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _allowed_hosts(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            value = (value,)
        entries = [egress.normalize(str(v)) for v in value]  # type: ignore[attr-defined]
        return tuple(dict.fromkeys(entries))

    @model_validator(mode="after")
    def _allowlist(self) -> SandboxSpec:
        if self.allowed_hosts and self.network != "allowlist":
            raise ValueError("allowed_hosts needs network 'allowlist'")
        return self

    @model_validator(mode="after")
    def _volume_targets(self) -> SandboxSpec:
        targets = [v.target.rstrip("/") for v in self.volumes]
        # read-only, the workdir and scratch folders are mounts of their own
        taken = {p.rstrip("/") for p in (self.workdir, *self.scratch)} if self.read_only else set()
        clash = sorted({t for t in targets if targets.count(t) > 1 or t in taken})
        if clash:  # the engine would refuse two mounts at one place
            raise ValueError(f"volume targets must differ (from the writable folders too): {clash}")
        return self

    @field_validator("cap_add", mode="before")
    @classmethod
    def _caps(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            value = (value,)
        names = tuple(str(v).upper().removeprefix("CAP_") for v in value)  # type: ignore[attr-defined]
        unknown = sorted(set(names) - CAPABILITIES)
        if unknown:
            raise ValueError(f"unknown capabilities: {', '.join(unknown)}")
        return names

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = [k for k in value if k.startswith(RESERVED_PREFIX)]
        if reserved:
            raise ValueError(f"labels starting with {RESERVED_PREFIX!r} are ours: {reserved}")
        return value

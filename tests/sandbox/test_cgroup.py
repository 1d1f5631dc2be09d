"""The host-side cgroup reader understands both cgroup versions and both Docker drivers."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.sandbox.cgroup import cpu_usage_ns

pytestmark = pytest.mark.no_docker


def test_reads_cgroup_v1_cgroupfs(tmp_path: Path) -> None:
    f = tmp_path / "cpuacct/docker/abc/cpuacct.usage"
    f.parent.mkdir(parents=True)
    f.write_text("123456789\n")
    assert cpu_usage_ns("abc", root=tmp_path) == 123456789


def test_reads_cgroup_v2_systemd(tmp_path: Path) -> None:
    f = tmp_path / "system.slice/docker-abc.scope/cpu.stat"
    f.parent.mkdir(parents=True)
    f.write_text("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
    assert cpu_usage_ns("abc", root=tmp_path) == 2_500_000


def test_unknown_container_is_none(tmp_path: Path) -> None:
    assert cpu_usage_ns("nope", root=tmp_path) is None

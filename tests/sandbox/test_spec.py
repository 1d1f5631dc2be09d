"""SandboxSpec is a value: equal specs hash equal (Inspect AI keys sandbox configs by hash)."""

from __future__ import annotations

import pytest

from agentenv.sandbox import SandboxSpec

pytestmark = pytest.mark.no_docker


def test_specs_are_hashable_and_equal_ones_hash_equal() -> None:
    one = SandboxSpec(env={"A": "1", "B": "2"}, labels={"x": "y"}, options={"runtime": "runc"})
    two = SandboxSpec(env={"B": "2", "A": "1"}, labels={"x": "y"}, options={"runtime": "runc"})
    assert one == two and hash(one) == hash(two)
    assert {one: "found"}[two] == "found"
    assert hash(one) != hash(one.model_copy(update={"env": {"A": "1"}}))
    assert len({SandboxSpec(), SandboxSpec(), SandboxSpec(cpus=2)}) == 2

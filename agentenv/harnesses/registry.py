"""Harnesses by name: the built-in ones, and those other packages register under the entry
point group ``agentenv.harnesses`` with a :class:`Harness` (or a function returning one)::

    [project.entry-points."agentenv.harnesses"]
    my-agent = "my_package.harness:harness"
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from agentenv.harnesses.base import Harness

ENTRY_POINT_GROUP = "agentenv.harnesses"
BUILTIN = {
    "mini-swe-agent": "agentenv.harnesses.mini_swe_agent:harness",
    "codex": "agentenv.harnesses.codex:harness",
    "claude-code": "agentenv.harnesses.claude_code:harness",
}


class UnknownHarness(ValueError):
    """No harness is registered under that name."""


def harness_names() -> list[str]:
    """Every harness that can be asked for by name: the built-in and the registered."""
    found = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(found | set(BUILTIN))


def harness(name: str) -> Harness:
    """The harness called ``name``; :class:`UnknownHarness` naming the known ones."""
    target = BUILTIN.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        found: object = getattr(importlib.import_module(module), attr)
    else:
        registered = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not registered:
            known = ", ".join(harness_names())
            raise UnknownHarness(f"no agent harness is called {name!r}; known: {known}")
        found = registered[0].load()
    value = found() if callable(found) and not isinstance(found, Harness) else found
    if not isinstance(value, Harness):
        raise UnknownHarness(f"harness {name!r} ({found!r}) is not a Harness")
    return value

"""The guest programs run in images we do not control: each parses as Python 3.6 and
imports only the standard library (what the lint profile cannot check, ruff's oldest
target being 3.7)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import agentenv.guest

pytestmark = pytest.mark.no_docker

PROGRAMS = sorted(Path(agentenv.guest.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_parses_as_python_36_and_imports_only_the_stdlib(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path), feature_version=(3, 6))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: a relative import"
            assert node.module != "__future__", f"{path.name}: a __future__ import (3.7+)"
            imported.add(str(node.module).split(".")[0])
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names


def test_every_program_is_found() -> None:
    assert {p.stem for p in PROGRAMS} >= {"executor", "nsop", "wipe"}

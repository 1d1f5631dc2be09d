"""Files agentenv ships beside its code: where the checker programs are."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def checkers_dir() -> Path:
    """The folder of checker programs copied into checker sandboxes: the installed package
    data (``agentenv._checkers``, from a wheel or an editable install), else the
    checkout's ``verifiers/``."""
    spec = importlib.util.find_spec("agentenv._checkers")
    if spec is not None and spec.submodule_search_locations:
        found = Path(next(iter(spec.submodule_search_locations)))
        if (found / "run_pytest.py").is_file():
            return found
    return Path(__file__).resolve().parent.parent / "verifiers"

"""SWE-bench-style instances, as they were importable here: loading is
:mod:`agentenv.formats.swebench`, the verdict the ``swebench`` check kind
(:mod:`agentenv.verify.kinds.swebench`)."""

from __future__ import annotations

from agentenv.formats.swebench import (
    REQUIRED,
    WORKDIR,
    cache_dir,
    is_instances_file,
    materialize,
    read_instances,
    swebench_image,
    task_files,
)

__all__ = [
    "REQUIRED",
    "WORKDIR",
    "cache_dir",
    "is_instances_file",
    "materialize",
    "read_instances",
    "swebench_image",
    "task_files",
]

"""The check kinds a task's ``[verifier]`` may name, one file each: its pydantic model and
its scorer, which registers itself under the kind (:mod:`agentenv.verify.registry`). To add
a kind, add its file here and its model to :data:`Check`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentenv.verify.kinds.command import CommandCheck
from agentenv.verify.kinds.composite import CompositeCheck, leaf_checks
from agentenv.verify.kinds.file import FileCheck
from agentenv.verify.kinds.harbor import HarborCheck
from agentenv.verify.kinds.image import ImageCheck
from agentenv.verify.kinds.json import JsonCheck
from agentenv.verify.kinds.outputs import OutputsCheck
from agentenv.verify.kinds.pytest import PytestCheck
from agentenv.verify.kinds.swebench import SweBenchCheck

Check = Annotated[
    CommandCheck
    | PytestCheck
    | FileCheck
    | JsonCheck
    | ImageCheck
    | OutputsCheck
    | CompositeCheck
    | HarborCheck
    | SweBenchCheck,
    Field(discriminator="kind"),
]
"""A check of any kind, told apart by its ``kind`` field."""
CompositeCheck.model_rebuild()

__all__ = [
    "Check",
    "CommandCheck",
    "CompositeCheck",
    "FileCheck",
    "HarborCheck",
    "ImageCheck",
    "JsonCheck",
    "OutputsCheck",
    "PytestCheck",
    "SweBenchCheck",
    "leaf_checks",
]
